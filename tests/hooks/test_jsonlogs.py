"""What the sync hook adds to a job that asks for JSON logs, through POST /sync as Metacontroller calls
it: one ConfigMap child holding the shipped sitecustomize, and in every container of every pod the
mount, PYTHONPATH and identity; a job without the annotation gets none of it (docs/json-logs.md)."""

from __future__ import annotations

import copy
import json

import pytest

from hooks.app import create_app
from tests.builders import container, job, replica
from tests.controller.fakes import Cluster, by_name
from trainop.api import constants as c
from trainop.extensions.jsonlogs import MODULE, MOUNT_PATH, VOLUME, sitecustomize_source
from trainop.extensions.jsonlogs.extension import ANNOTATION
from trainop.job.settings import Settings
from trainop.jsontypes import Json

IDENTITY = {
    "TRAINOP_JOB_NAME",
    "TRAINOP_NAMESPACE",
    "TRAINOP_POD_NAME",
    "TRAINOP_NODE_NAME",
    "TRAINOP_REPLICA_TYPE",
    "TRAINOP_REPLICA_INDEX",
}
JOBS = [
    job("TFJob", name="j", namespace="ns", Chief=1, PS=1, Worker=2),
    job("PyTorchJob", name="j", namespace="ns", Master=1, Worker=2),
    job("XGBoostJob", name="j", namespace="ns", Master=1, Worker=1),
    job("MPIJob", name="j", namespace="ns", Launcher=1, Worker=2),
    job("PaddleJob", name="j", namespace="ns", Master=1, Worker=2),
    job("JAXJob", name="j", namespace="ns", Worker=2),
    job("MXJob", name="j", namespace="ns", Scheduler=1, Server=1, Worker=1),
]
KIND_IDS = [j["kind"] for j in JOBS]


def annotated(obj: Json, value: str = "json") -> Json:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("annotations", {})[ANNOTATION] = value
    return out


def synced_children(obj: Json) -> list[Json]:
    """The children the hook server answers for the sync of `obj` after its first (with the ConfigMaps
    the pods mount and MPI's ServiceAccount observed, so that every pod is built)."""
    cluster = Cluster(obj)
    cluster.sync()
    response = (
        create_app(Settings())
        .test_client()
        .post("/sync", data=json.dumps(cluster.request()), content_type="application/json")
    )
    assert response.status_code == 200, response.data[:300]
    children: list[Json] = response.get_json()["children"]
    return children


def pods(children: list[Json]) -> list[Json]:
    return [o for o in children if o["kind"] == "Pod"]


def all_containers(pod: Json) -> list[Json]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


def env(ctr: Json) -> dict[str, Json]:
    return {v["name"]: v for v in ctr.get("env", [])}


@pytest.mark.parametrize("obj", JOBS, ids=KIND_IDS)
def test_the_job_gets_one_configmap_child_holding_the_shipped_module(obj: Json) -> None:
    maps = by_name(synced_children(annotated(obj)), "ConfigMap")
    assert maps["j-jsonlogs"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "j-jsonlogs",
            "namespace": "ns",
            "labels": {c.LABEL_JOB_NAME: "j", "trainop.dev/component": "json-logs"},
        },
        "data": {MODULE: sitecustomize_source()},
    }


@pytest.mark.parametrize("obj", JOBS, ids=KIND_IDS)
def test_every_container_of_every_pod_mounts_it_read_only_first_on_pythonpath(obj: Json) -> None:
    built = pods(synced_children(annotated(obj)))
    assert built
    for pod in built:
        assert {"name": VOLUME, "configMap": {"name": "j-jsonlogs"}} in pod["spec"]["volumes"]
        for ctr in all_containers(pod):
            assert {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True} in ctr["volumeMounts"]
            assert env(ctr)["PYTHONPATH"] == {"name": "PYTHONPATH", "value": MOUNT_PATH}


def test_the_pytorch_workers_init_container_gets_it_too() -> None:
    worker = by_name(synced_children(annotated(JOBS[1])), "Pod")["j-worker-0"]
    [init] = worker["spec"]["initContainers"]
    assert MOUNT_PATH in [m["mountPath"] for m in init["volumeMounts"]]


def test_each_pod_says_who_it_is_from_its_labels_and_the_downward_api() -> None:
    worker = by_name(synced_children(annotated(JOBS[1])), "Pod")["j-worker-1"]
    variables = env(worker["spec"]["containers"][0])
    assert {k: v for k, v in variables.items() if k in IDENTITY} == {
        "TRAINOP_JOB_NAME": {"name": "TRAINOP_JOB_NAME", "value": "j"},
        "TRAINOP_NAMESPACE": {
            "name": "TRAINOP_NAMESPACE",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        },
        "TRAINOP_POD_NAME": {
            "name": "TRAINOP_POD_NAME",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
        },
        "TRAINOP_NODE_NAME": {
            "name": "TRAINOP_NODE_NAME",
            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
        },
        "TRAINOP_REPLICA_TYPE": {
            "name": "TRAINOP_REPLICA_TYPE",
            "value": worker["metadata"]["labels"][c.LABEL_REPLICA_TYPE],
        },
        "TRAINOP_REPLICA_INDEX": {"name": "TRAINOP_REPLICA_INDEX", "value": "1"},
    }


def test_a_pod_without_an_index_label_has_no_index_variable() -> None:
    launcher = by_name(synced_children(annotated(JOBS[3])), "Pod")["j-launcher"]
    assert c.LABEL_REPLICA_INDEX not in launcher["metadata"]["labels"]
    assert "TRAINOP_REPLICA_INDEX" not in env(launcher["spec"]["containers"][0])


def test_a_containers_own_pythonpath_is_kept_after_the_module() -> None:
    own = container("pytorch", env=[{"name": "PYTHONPATH", "value": "/app:/lib"}])
    obj = job("PyTorchJob", name="j", namespace="ns", Worker=replica("PyTorchJob", 1, [own]))
    [pod] = pods(synced_children(annotated(obj)))
    assert [v for v in pod["spec"]["containers"][0]["env"] if v["name"] == "PYTHONPATH"] == [
        {"name": "PYTHONPATH", "value": f"{MOUNT_PATH}:/app:/lib"}
    ]


def test_a_pythonpath_from_a_configmap_is_referred_to_by_a_later_definition() -> None:
    source = {"configMapKeyRef": {"name": "paths", "key": "pythonpath"}}
    own = container("pytorch", env=[{"name": "PYTHONPATH", "valueFrom": source}])
    obj = job("PyTorchJob", name="j", namespace="ns", Worker=replica("PyTorchJob", 1, [own]))
    [pod] = pods(synced_children(annotated(obj)))
    assert [v for v in pod["spec"]["containers"][0]["env"] if v["name"] == "PYTHONPATH"] == [
        {"name": "PYTHONPATH", "valueFrom": source},
        {"name": "PYTHONPATH", "value": f"{MOUNT_PATH}:$(PYTHONPATH)"},
    ]


def without_json_logs(pod: Json) -> Json:
    """`pod` with what JSON logs add taken out again."""
    out = copy.deepcopy(pod)
    out["spec"]["volumes"] = [v for v in out["spec"]["volumes"] if v["name"] != VOLUME]
    if not out["spec"]["volumes"]:
        del out["spec"]["volumes"]
    for ctr in all_containers(out):
        ctr["env"] = [v for v in ctr["env"] if v["name"] not in {*IDENTITY, "PYTHONPATH"}]
        ctr["volumeMounts"] = [m for m in ctr["volumeMounts"] if m["name"] != VOLUME]
        for key in ("env", "volumeMounts"):
            if not ctr[key]:
                del ctr[key]
    return out


@pytest.mark.parametrize("obj", JOBS, ids=KIND_IDS)
def test_json_logs_add_exactly_the_mount_the_env_and_the_configmap(obj: Json) -> None:
    plain = synced_children(obj)
    logged = synced_children(annotated(obj))
    assert [without_json_logs(p) for p in pods(logged)] == pods(plain)
    others = [o for o in logged if o["kind"] != "Pod" and o["metadata"]["name"] != "j-jsonlogs"]
    assert others == [o for o in plain if o["kind"] != "Pod"]


@pytest.mark.parametrize("obj", JOBS, ids=KIND_IDS)
def test_text_is_the_same_as_no_annotation(obj: Json) -> None:
    assert synced_children(annotated(obj, "text")) == synced_children(obj)


def test_a_finished_job_keeps_its_configmap_as_last_applied() -> None:
    cluster = Cluster(annotated(JOBS[5]))
    cluster.sync()
    cluster.sync()  # the pods, once j-jsonlogs is the job's
    applied = copy.deepcopy(cluster.objects["ConfigMap.v1"]["j-jsonlogs"])
    cluster.run()
    cluster.succeed()
    cluster.sync(5)
    result = cluster.sync(5)
    assert cluster.state() == "Succeeded"
    assert "j-jsonlogs" in by_name(result.children, "ConfigMap")
    assert cluster.objects["ConfigMap.v1"]["j-jsonlogs"] == applied
