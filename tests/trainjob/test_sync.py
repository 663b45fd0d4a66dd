"""One TrainJob sync: children and status from what was observed, with Trainer's rules."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import yaml

from tests.trainjob.builders import node_container, torch_runtime, train_job
from trainop.controller.desire import LAST_APPLIED
from trainop.jsontypes import Json
from trainop.trainjob.build import desired_jobset
from trainop.trainjob.sync import Observed, snapshot_of, sync

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
STAMP = "2026-12-03T12:00:00Z"


def condition(ctype: str, status: str, reason: str, message: str = "", at: str = STAMP) -> Json:
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def job(**spec: object) -> Json:
    j = train_job("mnist", trainer={"numNodes": 2}, **spec)
    j["spec"]["runtimeRef"].update(apiGroup="trainer.kubeflow.org", kind="ClusterTrainingRuntime")
    j["metadata"]["creationTimestamp"] = "2026-12-03T11:00:00Z"
    return j


def applied(obj: Json, **extra: object) -> Json:
    """``obj`` as the apiserver returns it after Metacontroller applied it."""
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("annotations", {})[LAST_APPLIED] = json.dumps(obj)
    out["metadata"]["ownerReferences"] = [{"uid": "0b6f3c7e-1d2e-4f00-9a55-7f1f0c3c9e11", "controller": True}]
    out.update(extra)
    return out


def kinds(children: list[Json]) -> list[str]:
    return [c["kind"] for c in children]


def test_the_first_sync_freezes_the_runtime_and_builds_the_jobset() -> None:
    rt = torch_runtime()
    out = sync(Observed(job(), rt), NOW)
    assert kinds(out.children) == ["ConfigMap", "JobSet"]
    snapshot = out.children[0]
    assert snapshot["metadata"]["name"] == "mnist-runtime-snapshot"
    assert yaml.safe_load(snapshot["data"]["runtime"]) == rt
    assert out.children[1] == desired_jobset(job(), rt)


def test_a_started_job_keeps_the_runtime_of_its_snapshot() -> None:
    frozen = torch_runtime()
    edited = copy.deepcopy(frozen)
    edited["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["image"] = "new"
    out = sync(Observed(job(suspend=True), edited, snapshot=applied(snapshot_of(job(), frozen))), NOW)
    assert node_container(out.children[1])["image"] == "pytorch/pytorch"


def test_a_snapshot_of_another_job_is_an_event_not_a_rebuild() -> None:
    foreign = applied(snapshot_of(job(), torch_runtime()))
    foreign["metadata"]["ownerReferences"] = [{"uid": "other", "controller": True}]
    out = sync(Observed(job(), torch_runtime(), snapshot=foreign), NOW)
    assert [e.reason for e in out.events] == ["TrainJobResourcesCreationFailed"]
    assert "owned by another object" in out.events[0].message
    assert kinds(out.children) == ["ConfigMap"]


def test_a_missing_runtime_is_an_event_naming_it() -> None:
    out = sync(Observed(job(), None), NOW)
    assert out.children == []
    assert "ClusterTrainingRuntime 'torch-distributed' not found" in out.events[0].message


def test_a_running_jobset_is_left_as_applied_when_the_job_changes() -> None:
    rt = torch_runtime()
    running = applied(desired_jobset(job(), rt))
    changed = job()
    changed["spec"]["trainer"]["numNodes"] = 5
    out = sync(Observed(changed, rt, jobset=running, snapshot=applied(snapshot_of(job(), rt))), NOW)
    assert out.children[1] == desired_jobset(job(), rt)


def test_a_suspended_job_rebuilds_its_jobset_suspended() -> None:
    rt = torch_runtime()
    running = applied(desired_jobset(job(), rt))
    out = sync(Observed(job(suspend=True), rt, jobset=running, snapshot=applied(snapshot_of(job(), rt))), NOW)
    assert out.children[1]["spec"]["suspend"] is True
    assert out.status["conditions"] == [condition("Suspended", "True", "Suspended", "TrainJob is suspended")]


def test_resuming_turns_suspended_false_with_a_new_transition_time() -> None:
    suspended = condition("Suspended", "True", "Suspended", "TrainJob is suspended", "2026-12-03T11:30:00Z")
    resumed = job(suspend=False)
    resumed["status"] = {"conditions": [suspended]}
    out = sync(Observed(resumed, torch_runtime()), NOW)
    assert out.status["conditions"] == [condition("Suspended", "False", "Resumed", "TrainJob is resumed")]


def test_a_completed_jobset_completes_the_job_with_its_condition_and_counts() -> None:
    rt = torch_runtime()
    done = condition(
        "Completed", "True", "AllJobsCompleted", "jobset completed successfully", "2026-12-03T11:50:00Z"
    )
    jobset = applied(
        desired_jobset(job(), rt),
        status={"conditions": [done], "replicatedJobsStatus": [{"name": "node", "succeeded": 1}]},
    )
    out = sync(Observed(job(), rt, jobset=jobset, snapshot=applied(snapshot_of(job(), rt))), NOW)
    assert out.status["conditions"] == [{**done, "type": "Complete"}]
    assert out.status["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]


def test_a_finished_job_keeps_its_jobset_unchanged() -> None:
    rt = torch_runtime()
    finished = job(suspend=True)
    finished["status"] = {"conditions": [condition("Complete", "True", "AllJobsCompleted")]}
    jobset = applied(desired_jobset(job(), rt))
    out = sync(Observed(finished, rt, jobset=jobset, snapshot=applied(snapshot_of(job(), rt))), NOW)
    assert "suspend" not in out.children[1]["spec"]


def test_a_runtime_of_another_api_fails_the_job() -> None:
    other = job()
    other["spec"]["runtimeRef"]["kind"] = "Runtime"
    out = sync(Observed(other, torch_runtime()), NOW)
    assert out.status["conditions"][0]["reason"] == "TrainingRuntimeNotSupported"
    assert out.status["conditions"][0]["message"] == "unsupported runtime: Runtime.trainer.kubeflow.org"


def test_a_stale_failed_condition_goes_on_the_next_sync() -> None:
    stale = job()
    stale["status"] = {"conditions": [condition("Failed", "True", "TrainingRuntimeNotSupported", "x")]}
    assert "conditions" not in sync(Observed(stale, torch_runtime()), NOW).status


def test_the_deadline_resyncs_when_it_is_due() -> None:
    out = sync(Observed(job(activeDeadlineSeconds=3600 + 90), torch_runtime()), NOW)
    assert out.resync_after == 90.0


def test_past_its_deadline_the_job_fails_and_its_jobset_goes() -> None:
    rt = torch_runtime()
    jobset = applied(desired_jobset(job(), rt))
    out = sync(
        Observed(job(activeDeadlineSeconds=60), rt, jobset=jobset, snapshot=applied(snapshot_of(job(), rt))),
        NOW,
    )
    assert kinds(out.children) == ["ConfigMap"]
    assert out.status["conditions"][-1]["reason"] == "DeadlineExceeded"
    assert out.status["conditions"][-1]["message"] == "TrainJob exceeded its active deadline"


def test_the_deadline_counts_from_the_resume() -> None:
    resumed = job(activeDeadlineSeconds=600)
    resumed["status"] = {
        "conditions": [condition("Suspended", "False", "Resumed", at="2026-12-03T11:55:00Z")]
    }
    assert sync(Observed(resumed, torch_runtime()), NOW).resync_after == 300.0


def test_a_job_managed_by_multikueue_is_left_alone() -> None:
    remote = job(managedBy="kueue.x-k8s.io/multikueue")
    remote["status"] = {"conditions": [condition("Suspended", "True", "Suspended")]}
    out = sync(Observed(remote, torch_runtime()), NOW)
    assert out.children == []
    assert out.status == remote["status"]


def test_a_second_sync_of_the_same_state_changes_nothing() -> None:
    rt = torch_runtime()
    first = sync(Observed(job(suspend=True), rt), NOW)
    again = job(suspend=True)
    again["status"] = first.status
    snapshot, jobset = (applied(child) for child in first.children)
    second = sync(Observed(again, rt, jobset=jobset, snapshot=snapshot), NOW + timedelta(minutes=5))
    assert second.status == first.status
    assert second.children == first.children
