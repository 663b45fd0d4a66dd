"""A TrainJob through the hook server's HTTP routes, with bodies shaped as Metacontroller sends them:
the customize hook names its runtime, the sync answers its runtime snapshot and JobSet and its status."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from flask.testing import FlaskClient

from hooks.app import create_app
from hooks.bodycost import body_cost
from tests.trainjob.builders import container, runtime, torch_runtime, train_job, trainer_step
from trainop.jsoncost import COST_FLOOR
from trainop.jsontypes import Json
from trainop.trainjob import constants as c
from trainop.trainjob.hook import CONFIGMAP_CHILDREN, JOBSET_CHILDREN

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
RUNTIMES = f"ClusterTrainingRuntime.{c.API_VERSION}"


@pytest.fixture
def client() -> FlaskClient:
    return create_app(clock=lambda: NOW).test_client()


def sync_body(job: Json, related: Json | None = None, children: Json | None = None) -> Json:
    body: dict[str, Any] = {"controller": {}, "parent": job, "children": children or {}}
    if related is not None:
        body["related"] = related
    return body


def with_runtime(rt: Json) -> Json:
    """`related` as a v2 request holds the runtime: by `<namespace>/<name>`, or `<name>` cluster-wide."""
    meta = rt["metadata"]
    key = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
    return {f"{rt['kind']}.{c.API_VERSION}": {key: rt}}


def synced(client: FlaskClient, body: Json) -> Json:
    res = client.post("/sync", json=body)
    assert res.status_code == 200, res.get_data(as_text=True)
    answer: Json = res.get_json()
    return answer


def test_the_customize_hook_names_the_jobs_cluster_training_runtime(client: FlaskClient) -> None:
    job = train_job(
        runtimeRef={"name": "torch-distributed", "apiGroup": c.GROUP, "kind": "ClusterTrainingRuntime"}
    )
    res = client.post("/customize", json={"controller": {}, "parent": job})
    assert res.status_code == 200
    assert res.get_json() == {
        "relatedResources": [
            {
                "apiVersion": c.API_VERSION,
                "resource": "clustertrainingruntimes",
                "names": ["torch-distributed"],
            }
        ]
    }


def test_the_customize_hook_names_a_training_runtime_in_the_jobs_namespace(client: FlaskClient) -> None:
    job = train_job(runtimeRef={"name": "mine", "apiGroup": c.GROUP, "kind": "TrainingRuntime"})
    res = client.post("/customize", json={"controller": {}, "parent": job})
    rule = {
        "apiVersion": c.API_VERSION,
        "resource": "trainingruntimes",
        "names": ["mine"],
        "namespace": "team-a",
    }
    assert res.get_json() == {"relatedResources": [rule]}


def test_the_customize_hook_names_nothing_for_a_runtime_of_another_api_group(client: FlaskClient) -> None:
    job = train_job(runtimeRef={"name": "x", "apiGroup": "example.com", "kind": "ClusterTrainingRuntime"})
    res = client.post("/customize", json={"controller": {}, "parent": job})
    assert res.get_json() == {"relatedResources": []}


def test_a_new_train_job_gets_its_runtime_snapshot_and_its_jobset(client: FlaskClient) -> None:
    job = train_job(
        runtimeRef={"name": "torch-distributed", "apiGroup": c.GROUP, "kind": "ClusterTrainingRuntime"}
    )
    answer = synced(client, sync_body(job, with_runtime(torch_runtime())))
    kinds = sorted((child["kind"], child["metadata"]["name"]) for child in answer["children"])
    assert kinds == [("ConfigMap", "mnist-runtime-snapshot"), ("JobSet", "mnist")]
    assert answer["status"] == {}


def test_a_train_job_whose_runtime_is_missing_gets_no_children_and_its_reason_is_logged(
    client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    job = train_job(runtimeRef={"name": "gone", "apiGroup": c.GROUP, "kind": "ClusterTrainingRuntime"})
    with caplog.at_level(logging.WARNING, logger="trainop.hooks"):
        answer = synced(client, sync_body(job, {RUNTIMES: {}}))
    assert answer["children"] == []
    assert "TrainJobResourcesCreationFailed" in caplog.text
    assert "ClusterTrainingRuntime 'gone' not found" in caplog.text


def test_a_completed_jobset_completes_the_train_job_and_fills_jobs_status(client: FlaskClient) -> None:
    job = train_job(
        runtimeRef={"name": "torch-distributed", "apiGroup": c.GROUP, "kind": "ClusterTrainingRuntime"}
    )
    first = synced(client, sync_body(job, with_runtime(torch_runtime())))
    snapshot, jobset = sorted(first["children"], key=lambda child: str(child["kind"]))
    snapshot["metadata"]["ownerReferences"] = [{"controller": True, "uid": job["metadata"]["uid"]}]
    done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
            "message": "jobset completed", "lastTransitionTime": "2026-12-03T11:59:00Z"}  # fmt: skip
    jobset["status"] = {
        "conditions": [done],
        "replicatedJobsStatus": [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0}],
    }
    children = {
        CONFIGMAP_CHILDREN: {"team-a/mnist-runtime-snapshot": snapshot},
        JOBSET_CHILDREN: {"team-a/mnist": jobset},
    }
    answer = synced(client, sync_body(job, with_runtime(torch_runtime()), children))
    assert [(x["type"], x["status"], x["reason"]) for x in answer["status"]["conditions"]] == [
        ("Complete", "True", "AllJobsCompleted")
    ]
    assert answer["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]


def test_a_train_job_past_its_deadline_fails_and_keeps_no_jobset(client: FlaskClient) -> None:
    job = train_job(
        runtimeRef={"name": "torch-distributed", "apiGroup": c.GROUP, "kind": "ClusterTrainingRuntime"},
        activeDeadlineSeconds=60,
    )
    job["metadata"]["creationTimestamp"] = "2026-12-03T11:00:00Z"
    answer = synced(client, sync_body(job, with_runtime(torch_runtime())))
    assert [child["kind"] for child in answer["children"]] == ["ConfigMap"]
    failed = answer["status"]["conditions"][-1]
    assert (failed["type"], failed["reason"]) == ("Failed", "DeadlineExceeded")


def test_a_running_train_job_is_synced_again_at_its_deadline(client: FlaskClient) -> None:
    job = train_job(
        runtimeRef={"name": "torch-distributed", "apiGroup": c.GROUP, "kind": "ClusterTrainingRuntime"},
        activeDeadlineSeconds=600,
    )
    job["metadata"]["creationTimestamp"] = "2026-12-03T11:59:00Z"
    answer = synced(client, sync_body(job, with_runtime(runtime())))
    assert answer["resyncAfterSeconds"] == 540


def test_a_train_job_body_with_a_related_map_of_the_wrong_shape_is_a_400(client: FlaskClient) -> None:
    job = train_job()
    res = client.post("/sync", json=sync_body(job, {RUNTIMES: ["not", "a", "map"]}))
    assert res.status_code == 400
    assert "related" in res.get_json()["error"]


def test_a_training_runtime_is_read_from_the_jobs_namespace_only(client: FlaskClient) -> None:
    job = train_job(runtimeRef={"name": "mine", "apiGroup": c.GROUP, "kind": "TrainingRuntime"})
    elsewhere = runtime(kind="TrainingRuntime", name="mine")
    elsewhere["metadata"]["namespace"] = "team-b"
    related = {f"TrainingRuntime.{c.API_VERSION}": {"team-b/mine": elsewhere}}
    assert synced(client, sync_body(job, related))["children"] == []
    own = runtime(kind="TrainingRuntime", name="mine")
    answer = synced(client, sync_body(job, with_runtime(own)))
    assert sorted(child["kind"] for child in answer["children"]) == ["ConfigMap", "JobSet"]


def test_the_largest_trainjob_the_apiserver_stores_syncs(client: FlaskClient) -> None:
    # A runtime near etcd's 1.5 MiB: its node container's env is most of it.
    big = runtime(trainer_step(container("node", "pytorch/pytorch", env=[
        {"name": f"V{i:05d}", "value": "x" * 120} for i in range(10_000)
    ])))  # fmt: skip
    job = train_job(
        runtimeRef={"name": "torch-distributed", "apiGroup": c.GROUP, "kind": "ClusterTrainingRuntime"}
    )
    first = synced(client, sync_body(job, with_runtime(big)))
    snapshot, jobset = sorted(first["children"], key=lambda child: str(child["kind"]))
    for child in (snapshot, jobset):
        # As the apiserver returns them: owned, with Metacontroller's last-applied copy of the whole object.
        child["metadata"]["ownerReferences"] = [{"controller": True, "uid": job["metadata"]["uid"]}]
        child["metadata"]["annotations"] = {
            "metacontroller.k8s.io/last-applied-configuration": json.dumps(child)
        }
    children = {
        CONFIGMAP_CHILDREN: {"team-a/mnist-runtime-snapshot": snapshot},
        JOBSET_CHILDREN: {"team-a/mnist": jobset},
    }
    body = json.dumps(sync_body(job, with_runtime(big), children)).encode()
    assert body_cost(body, 1 << 40) > COST_FLOOR  # past the size any job may send before its allowance counts
    res = client.post("/sync", data=body, content_type="application/json")
    assert res.status_code == 200, res.get_data(as_text=True)[:300]
    assert sorted(child["kind"] for child in res.get_json()["children"]) == ["ConfigMap", "JobSet"]
