"""Kubeflow against Kubeflow: the differential harness on two Kubeflow stacks, to show its own noise.

Every difference it prints (beyond noise.py's rules, applied in both directions since both sides are
Kubeflow) is something the harness fails to pin down (a checkpoint taken while an
operator is still acting, a field Kubeflow sets nondeterministically); the real test would report it
against us too. Run after changing cases, waits or normalisation:

    python tests/differential/selfcheck.py [CASE-ID-SUBSTRING ...]
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "e2e"), str(HERE)]

import noise  # noqa: E402
from cases import all_cases  # noqa: E402
from harness import start_stacks  # noqa: E402
from kubeflow_stack import kubeflow_dir  # noqa: E402


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="differential-selfcheck-") as tmp:
        stacks = start_stacks(Path(tmp), self_check=True)
        try:
            cases = [
                c for c in all_cases(kubeflow_dir() / "examples") if not argv or any(a in c.id for a in argv)
            ]
            result = stacks.run_all(cases)
        finally:
            stacks.stop()
    # Both sides are Kubeflow, so its randomness may show in either direction.
    unexplained = [
        d
        for c in result.compared
        for d in c.differences
        if not noise.explain(d, c.kubeflow.checkpoints.get(d.checkpoint) or {})
        and not noise.explain(
            dataclasses.replace(d, kubeflow=d.trainop, trainop=d.kubeflow),
            c.trainop.checkpoints.get(d.checkpoint) or {},
        )
    ]
    print("\n".join(d.render() for d in unexplained))
    print("\n".join(result.harness_errors()))
    print(result.summary())
    print(f"unexplained by noise.py in either direction: {len(unexplained)}")
    return 1 if unexplained or result.harness_errors() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
