"""A TrainJob's status from its JobSet is the status Kubeflow Trainer v2.3.0's controller writes.

Trainer's controller makes the JobSet, the real JobSet controller its Jobs, the Job controller the pods
and kwok runs them to the outcome their annotations ask for (tests/e2e/kwok-stages.yaml). Once Trainer's
TrainJob has settled, `trainop.trainjob.sync` is given the same job (without its status), runtime, JobSet
and snapshot as observed, and its status must be Trainer's: conditions and jobsStatus.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from jobset_controller import running_jobset
from kwok_trainjobs import kwok_job, kwok_runtime
from trainer_controller import running_trainer
from trainop_stack import Namespace, TrainopStack, kwok_annotations

from trainop.trainjob.sync import Observed, sync

pytestmark = pytest.mark.e2e

Json = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def controllers(stack: TrainopStack) -> Iterator[None]:
    with running_trainer(stack.cp), running_jobset(stack.cp):
        yield


def condition_types(job: Json) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}


def run(ns: Namespace, annotations: dict[str, str], settled: str, **spec: Any) -> tuple[Json, Json]:
    """Trainer's settled TrainJob, and ours computed from the same observed objects."""
    ns.apply(kwok_runtime(annotations))
    ns.create(kwok_job(**spec))
    ns.wait_until(
        f"the TrainJob {settled}",
        lambda: condition_types(ns.get("trainjob/train")).get(settled) == "True",
        timeout=120,
    )
    theirs = ns.get("trainjob/train")
    jobset = ns.get("jobset/train")
    if settled != "Suspended":
        # Trainer's status follows the JobSet's; wait until it has caught up with the JobSet read.
        ns.wait_until(
            "jobsStatus as in the JobSet",
            lambda: _counts(ns.get("trainjob/train")) == _counts_of(jobset),
            timeout=30,
        )
        theirs = ns.get("trainjob/train")
    observed = Observed(
        job={**theirs, "status": {}},
        runtime=ns.get("trainingruntime/kwok"),
        jobset=jobset,
        snapshot=ns.get("configmap/train-runtime-snapshot"),
    )
    return theirs, sync(observed, datetime.now(UTC)).status


def _counts(job: Json) -> Any:
    return (job.get("status") or {}).get("jobsStatus")


def _counts_of(jobset: Json) -> Any:
    return [
        {
            "name": r["name"],
            **{k: r.get(k, 0) for k in ("ready", "succeeded", "failed", "active", "suspended")},
        }
        for r in (jobset.get("status") or {}).get("replicatedJobsStatus") or []
    ] or None


def test_a_succeeded_jobset_completes_the_trainjob_as_trainer_does(namespace: Namespace) -> None:
    theirs, ours = run(namespace, kwok_annotations(outcome="Succeeded", run_for="1s"), "Complete")
    assert ours == theirs["status"]


def test_a_failed_jobset_fails_the_trainjob_as_trainer_does(namespace: Namespace) -> None:
    theirs, ours = run(namespace, kwok_annotations(outcome="Failed", run_for="1s", exit_code=1), "Failed")
    assert ours == theirs["status"]


def test_a_suspended_trainjob_says_so_as_trainer_does(namespace: Namespace) -> None:
    theirs, ours = run(
        namespace, kwok_annotations(outcome="Succeeded", run_for="1s"), "Suspended", suspend=True
    )
    # The transition time is the moment of the sync, Trainer's or ours.
    for c in ours["conditions"] + theirs["status"]["conditions"]:
        c.pop("lastTransitionTime")
    assert ours == theirs["status"]
