"""The in-process fuzz suites draw the same examples whatever else the run imports or collects.

The gate's promise (CONTRIBUTING.md#fuzzing-and-turning-a-found-bug-into-a-regression-example) is a verdict
that depends on the commit only. Each run below draws a few examples of every hooks and webhooks property
in a fresh pytest process, composed differently each time, and tests/drawlog.py records a digest of each
example; the three records must be the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.drawlog import LOG_VARIABLE

REPO = Path(__file__).resolve().parents[1]
# Enough examples that a draw which depends on global state shows it, few enough to keep this test short.
EXAMPLES = "25"
PROPERTIES = {
    "tests/hooks/test_http.py": [
        "test_fuzzed_metacontroller_bodies_never_get_a_5xx",
        "test_random_json_never_gets_a_5xx",
        "test_random_bytes_never_get_a_5xx",
    ],
    "tests/hooks/test_fuzz_hostile.py": [
        "test_hostile_sync_bodies_never_get_a_5xx",
        "test_hostile_finalize_bodies_never_get_a_5xx",
    ],
    "tests/webhooks/test_fuzz.py": [
        "test_corrupted_admission_reviews_get_a_clean_answer",
        "test_truncated_admission_reviews_get_400",
        "test_arbitrary_json_or_bytes_get_a_clean_answer",
        "test_random_specs_of_every_kind_get_a_clean_answer",
        "test_hostile_admission_reviews_to_mutate_get_a_clean_answer",
        "test_hostile_admission_reviews_to_validate_get_a_clean_answer",
    ],
}
NODE_IDS = [f"{path}::{name}" for path, names in PROPERTIES.items() for name in names]
# Every module of the three packages, imported before pytest starts.
IMPORT_EVERYTHING_FIRST = """
import importlib, pkgutil, sys
for top in ("trainop", "hooks", "webhooks"):
    for module in pkgutil.walk_packages(importlib.import_module(top).__path__, top + "."):
        importlib.import_module(module.name)
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def draws(log: Path, *argv: str) -> dict[str, list[str]]:
    """{property: digests of its examples, in order} of one pytest process run as `python *argv`."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "TRAINOP_FUZZ_EXAMPLES": EXAMPLES,
        LOG_VARIABLE: str(log),
    }
    done = subprocess.run(
        [sys.executable, *argv, "-q", "-p", "no:cacheprovider", "-p", "tests.drawlog"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    # 1 is a failing property: its own test reports that; only what was drawn is judged here.
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    out: dict[str, list[str]] = defaultdict(list)
    for line in log.read_text(encoding="utf-8").splitlines():
        name, digest = line.split(" ")
        out[name].append(digest)
    return dict(out)


def test_each_property_draws_the_same_examples_alone_after_every_import_and_beside_tests_ui(
    tmp_path: Path,
) -> None:
    alone: dict[str, list[str]] = {}
    for path, names in PROPERTIES.items():
        ids = [f"{path}::{name}" for name in names]
        alone |= draws(tmp_path / f"alone-{Path(path).stem}", "-m", "pytest", *ids)
    # Every property drew, and was logged under its module's name.
    assert sorted(alone) == sorted(
        f"{Path(path).with_suffix('').as_posix().replace('/', '.')}::{name}"
        for path, names in PROPERTIES.items()
        for name in names
    )
    after_every_import = draws(tmp_path / "imported", "-c", IMPORT_EVERYTHING_FIRST, *NODE_IDS)
    # tests/ui collected first, so its modules (trainop.ui among them) are imported before any property runs.
    only = " or ".join(name for names in PROPERTIES.values() for name in names)
    beside_ui = draws(tmp_path / "beside-ui", "-m", "pytest", "tests/ui", *PROPERTIES, "-k", only)
    differ = sorted(
        (run, name)
        for run, drawn in (("after every import", after_every_import), ("beside tests/ui", beside_ui))
        for name in alone
        if drawn.get(name) != alone[name]
    )
    assert differ == []
