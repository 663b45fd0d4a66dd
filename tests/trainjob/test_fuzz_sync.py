"""Hostile TrainJobs, runtimes and children never make the v2 sync raise: it answers or names the problem.

The same hostile values as the hook servers' fuzz suites (tests/fuzzing.py), spliced into a real sync's
inputs, decoded as the hook server would decode them (what is not JSON is its 400, not the sync's).
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import orjson
from hypothesis import given

from hooks.request import _child_shape_problem
from tests.fuzzing import FUZZ, encode, hostile_bodies
from tests.trainjob.builders import container, patch, replicated_job, torch_runtime, train_job, trainer_step
from trainop.controller.desire import LAST_APPLIED
from trainop.trainjob.build import desired_jobset
from trainop.trainjob.sync import Observed, snapshot_of, sync

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


def _seed() -> dict[str, Any]:
    init = replicated_job(
        "dataset-initializer", container("dataset-initializer"), ancestor="dataset-initializer"
    )
    rt = torch_runtime(
        init, trainer_step(), envInjection={"targets": [{"jobName": "node", "containerNames": ["node"]}]}
    )
    job = train_job(
        trainer={
            "numNodes": 2,
            "env": [{"name": "A", "value": "1"}],
            "resourcesPerNode": {"limits": {"cpu": "2"}},
        },
        initializer={"dataset": {"storageUri": "hf://x/y", "secretRef": {"name": "s"}}},
        runtimePatches=[patch("kueue.x-k8s.io/manager", metadata={"labels": {"q": "a"}})],
        activeDeadlineSeconds=600,
    )
    job["spec"]["runtimeRef"].update(apiGroup="trainer.kubeflow.org", kind="ClusterTrainingRuntime")
    job["metadata"]["creationTimestamp"] = "2026-12-03T11:55:00Z"
    jobset = desired_jobset(job, rt)
    jobset["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(jobset)}
    completed = {"type": "Completed", "status": "True", "reason": "r", "message": "m"}
    jobset["status"] = {"conditions": [completed], "replicatedJobsStatus": [{"name": "node", "succeeded": 2}]}
    snapshot = copy.deepcopy(snapshot_of(job, rt))
    snapshot["metadata"]["ownerReferences"] = [{"uid": job["metadata"]["uid"], "controller": True}]
    return {"job": job, "runtime": rt, "jobset": jobset, "snapshot": snapshot}


SEEDS = [_seed()]


@FUZZ
@given(body=hostile_bodies(SEEDS))
def test_hostile_sync_inputs_get_an_answer(body: Any) -> None:
    try:
        inputs = orjson.loads(encode(body))
    except orjson.JSONDecodeError:
        return  # the hook server's 400
    # The hook server's request checks (hooks/request.py) guarantee an object with a named parent.
    if not isinstance(inputs, dict) or not isinstance(inputs.get("job"), dict):
        return
    if not _named(inputs["job"]):
        return
    # As children and related objects, each is an object with metadata and a name, or absent.
    objs = {k: v if _named(v) else None for k, v in inputs.items() if k != "job"}
    out = sync(Observed(inputs["job"], objs.get("runtime"), objs.get("jobset"), objs.get("snapshot")), NOW)
    assert isinstance(out.status, dict)
    assert all(isinstance(child, dict) for child in out.children)


def _named(obj: Any) -> bool:
    """Whether the hook server's request checks let ``obj`` through as a child or related object."""
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return False
    return isinstance(obj["metadata"].get("name"), str) and _child_shape_problem(obj) is None
