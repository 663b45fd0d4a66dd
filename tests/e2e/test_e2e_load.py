"""Many jobs at once, CI-sized: correctness under load, never timing (bench/load_bench.py has the figures).

One ``kubectl apply`` of 20 mixed jobs (PyTorch, TF, XGBoost, JAX; 1 + 3 pods each) on a stack of its own
whose apiserver keeps an audit log, with the chart's Metacontroller flags. The run happens once per module;
each test checks one property of it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from faults import audited_stack
from loadgen import LoadRun, mixed_jobs, run_load
from trainop_stack import TrainopStack

pytestmark = pytest.mark.e2e

JOBS = 20
WORKERS = 3
LONG_RESYNC_SECONDS = 3600


@pytest.fixture(scope="module")
def load_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainopStack]:
    # Periodic resyncs would be hook calls the "none after finish" window must not see: an hour keeps
    # them out of any run, however slow the machine.
    stack = audited_stack(tmp_path_factory.mktemp("e2e-load"), resync_period_seconds=LONG_RESYNC_SECONDS)
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module")
def run(load_stack: TrainopStack) -> LoadRun:
    # A fresh Metacontroller: no backoff or queued retry from an earlier module's jobs.
    load_stack.restart_metacontroller()
    return run_load(load_stack, mixed_jobs(JOBS, WORKERS, run_for="5s"), timeout=300)


def test_every_job_succeeds(run: LoadRun) -> None:
    assert run.succeeded == {j["metadata"]["name"] for j in mixed_jobs(JOBS, WORKERS, run_for="5s")}


def test_metacontroller_reports_no_failed_sync(run: LoadRun) -> None:
    assert run.failed_syncs == []


def test_children_are_only_created_never_rewritten(run: LoadRun) -> None:
    assert run.extra_child_writes == [], sorted(
        {f"{w.resource} {w.verb} {w.name}" for w in run.extra_child_writes}
    )
    assert run.child_writes == {"pods create": JOBS * (1 + WORKERS), "services create": JOBS * (1 + WORKERS)}


def test_no_job_is_synced_after_everything_finished(run: LoadRun) -> None:
    assert run.calls_after_finish == {}
