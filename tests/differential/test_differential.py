"""Our stack against Kubeflow Training Operator v1.9.4 itself, on the same jobs and the same pod stages.

Every difference in children, job status or Events must be named by an entry of
docs/deliberate-differences.yaml; see tests/differential/README.md.
"""

from __future__ import annotations

import pytest
from harness import Differential

pytestmark = pytest.mark.differential


def test_every_case_runs_to_its_end_on_both_operators(differential: Differential) -> None:
    errors = differential.harness_errors()
    assert not errors, "the harness could not drive these cases:\n" + "\n".join(errors)


def test_every_difference_from_kubeflow_is_deliberate(differential: Differential) -> None:
    unlisted = differential.unlisted()
    assert not unlisted, (
        f"{len(unlisted)} differences from Kubeflow are not in docs/deliberate-differences.yaml "
        f"({differential.summary()}):\n{differential.report()}"
    )


def test_every_deliberate_difference_still_shows(differential: Differential) -> None:
    stale = differential.stale_entries()
    assert not stale, (
        f"entries of docs/deliberate-differences.yaml whose selectors matched nothing: {stale}; "
        "drop them (or their 'match') if the difference is gone"
    )
