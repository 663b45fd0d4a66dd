"""Fixtures of the differential test: Kubeflow's operator and ours, each on its own control plane.

``differential`` (module) builds or reuses every binary (never skips: a missing one fails the run),
starts both stacks side by side, runs every case on both at once (one namespace per case) and hands
the records to the tests. The e2e helpers live in tests/e2e, which is put on ``sys.path`` here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE))

from controlplane import ControlPlaneError  # noqa: E402
from harness import Differential, start_stacks  # noqa: E402

_RESULT: Differential | None = None


# Module scope: the two stacks go away as soon as test_differential.py is done, instead of idling beside
# the rest of the run.
@pytest.fixture(scope="module")
def differential(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Differential]:
    global _RESULT
    work = tmp_path_factory.mktemp("differential")
    try:
        stacks = start_stacks(work)
    except ControlPlaneError as e:
        pytest.fail(f"the differential stacks did not start: {e}", pytrace=False)
    try:
        result = stacks.run_all()
        result.write(work / "differential.json")
        _RESULT = result
        yield result
    finally:
        stacks.stop()
        leftovers = stacks.kubeflow.cp.leftover_processes() + stacks.trainop.cp.leftover_processes()
        if leftovers:  # pragma: no cover - teardown bug
            raise AssertionError(f"processes survived teardown: {leftovers}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and _RESULT is not None and "differential" in item.nodeid:
        report.sections.append(("differential component logs (tails)", _RESULT.log_tails))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _RESULT is not None:
        terminalreporter.write_line(_RESULT.summary())
        terminalreporter.write_line(f"  every checkpoint and verdict: {_RESULT.saved_to}")
