"""JSON logs on the real apiserver: the annotation validated and defaulted by the real webhooks, with the
cluster's default set to json as the chart's `logging.trainingProcesses.format: json` sets it (both
servers read TRAINOP_DEFAULT_LOG_FORMAT); the ConfigMap child and the pods' template exactly as
docs/json-logs.md documents them.

kwok runs no container, so no Python process writes a record here (the real-node tier does that); this
proves the objects the kubelet would be given.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from trainop_stack import IMAGE, Namespace, TrainopStack, job, kwok_annotations, replica, scratch_namespace

from trainop.extensions.jsonlogs import MOUNT_PATH, VOLUME, sitecustomize_source
from trainop.extensions.jsonlogs.extension import ANNOTATION, DEFAULT_ENV
from trainop.jsontypes import Json

pytestmark = pytest.mark.e2e

FIELD = f"metadata.annotations[{ANNOTATION}]"


@pytest.fixture(scope="module")
def json_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainopStack]:
    with TrainopStack(tmp_path_factory.mktemp("e2e-jsonlogs"), server_env={DEFAULT_ENV: "json"}) as stack:
        yield stack.start()


@pytest.fixture
def ns(json_stack: TrainopStack) -> Iterator[Namespace]:
    with scratch_namespace(json_stack, "jsonlogs") as namespace:
        yield namespace


def pytorch_job(name: str, annotations: dict[str, str] | None = None, run_for: str = "2s") -> Json:
    running = kwok_annotations(run_for=run_for)
    out = job(
        "PyTorchJob",
        name,
        {
            "Master": replica("PyTorchJob", annotations=running),
            "Worker": replica("PyTorchJob", 2, annotations=running),
        },
    )
    if annotations is not None:
        out["metadata"]["annotations"] = annotations
    return out


def pods(ns: Namespace, name: str, count: int) -> dict[str, Json]:
    ns.wait_until(f"{count} pods of {name}", lambda: len(ns.job_children("pods", name)) == count)
    return ns.job_children("pods", name)


def env_of(container: Json) -> dict[str, Json]:
    return {e["name"]: e for e in container.get("env") or []}


def test_a_bad_value_is_denied_naming_the_annotation_and_the_values(ns: Namespace) -> None:
    done = ns.create(pytorch_job("bad", {ANNOTATION: "JSON"}), check=False)
    assert done.returncode != 0
    assert f'{FIELD}: Unsupported value: "JSON": supported values: "json", "text"' in done.stderr


def test_changing_the_annotation_to_a_bad_value_is_denied_too(ns: Namespace) -> None:
    ns.create(pytorch_job("later", run_for="60s"))
    done = ns.kubectl("annotate", "pytorchjob/later", f"{ANNOTATION}=yes", "--overwrite", check=False)
    assert done.returncode != 0
    assert f'{FIELD}: Unsupported value: "yes"' in done.stderr


def test_the_cluster_default_is_written_onto_a_job_without_the_annotation(ns: Namespace) -> None:
    ns.create(pytorch_job("plain"))
    assert ns.get("pytorchjob/plain")["metadata"]["annotations"] == {ANNOTATION: "json"}


def test_a_job_that_says_text_keeps_it_and_gets_nothing_added(ns: Namespace) -> None:
    ns.create(pytorch_job("texty", {ANNOTATION: "text"}))
    assert ns.get("pytorchjob/texty")["metadata"]["annotations"] == {ANNOTATION: "text"}
    for pod in pods(ns, "texty", 3).values():
        assert VOLUME not in {v["name"] for v in pod["spec"].get("volumes") or []}
        for container in pod["spec"]["containers"]:
            assert not {"PYTHONPATH", "TRAINOP_JOB_NAME"} & set(env_of(container))
    assert not ns.exists("configmap/texty-jsonlogs")


def test_the_configmap_child_holds_the_shipped_module_and_is_owned_by_the_job(ns: Namespace) -> None:
    ns.create(pytorch_job("digits"))
    ns.wait_until("the JSON-logs ConfigMap", lambda: ns.exists("configmap/digits-jsonlogs"))
    config_map = ns.get("configmap/digits-jsonlogs")
    assert config_map["data"] == {"sitecustomize.py": sitecustomize_source()}
    uid = ns.get("pytorchjob/digits")["metadata"]["uid"]
    assert config_map["metadata"]["labels"] == {
        "training.kubeflow.org/job-name": "digits",
        "trainop.dev/component": "json-logs",
        "controller-uid": uid,  # Metacontroller's, on every child
    }
    (owner,) = config_map["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("PyTorchJob", "digits", True)


def test_every_container_mounts_the_module_first_on_pythonpath_with_its_identity(ns: Namespace) -> None:
    ns.create(pytorch_job("ident"))
    for name, pod in pods(ns, "ident", 3).items():
        spec = pod["spec"]
        assert {"name": VOLUME, "configMap": {"name": "ident-jsonlogs", "defaultMode": 420}} in spec[
            "volumes"
        ]
        labels = pod["metadata"]["labels"]
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            assert {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True} in container["volumeMounts"]
            env = env_of(container)
            assert env["PYTHONPATH"] == {"name": "PYTHONPATH", "value": MOUNT_PATH}, name
            assert env["TRAINOP_JOB_NAME"]["value"] == "ident"
            assert env["TRAINOP_REPLICA_TYPE"]["value"] == labels["training.kubeflow.org/replica-type"]
            assert env["TRAINOP_REPLICA_INDEX"]["value"] == labels["training.kubeflow.org/replica-index"]
            downward = {n: env[n]["valueFrom"]["fieldRef"]["fieldPath"] for n in env if "valueFrom" in env[n]}
            assert downward == {
                "TRAINOP_NAMESPACE": "metadata.namespace",
                "TRAINOP_POD_NAME": "metadata.name",
                "TRAINOP_NODE_NAME": "spec.nodeName",
            }


def test_a_containers_own_pythonpath_follows_the_module(ns: Namespace) -> None:
    obj = pytorch_job("own")
    for rspec in obj["spec"]["pytorchReplicaSpecs"].values():
        rspec["template"]["spec"]["containers"][0]["env"] = [{"name": "PYTHONPATH", "value": "/app/lib"}]
    ns.create(obj)
    for pod in pods(ns, "own", 3).values():
        (container,) = pod["spec"]["containers"]
        assert env_of(container)["PYTHONPATH"]["value"] == f"{MOUNT_PATH}:/app/lib"


def test_the_stored_template_of_the_job_is_not_changed(ns: Namespace) -> None:
    # The mount and the environment are the pods', not the job's: `kubectl get -o yaml` of the job
    # shows only the annotation, the template stays the user's.
    ns.create(pytorch_job("stored"))
    template = ns.get("pytorchjob/stored")["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    (container,) = template["spec"]["containers"]
    assert (container["image"], "env" in container, "volumeMounts" in container) == (IMAGE, False, False)
    assert "volumes" not in template["spec"]


def test_the_configmap_is_deleted_with_the_job(ns: Namespace) -> None:
    ns.create(pytorch_job("gone"))
    ns.wait_until("the JSON-logs ConfigMap", lambda: ns.exists("configmap/gone-jsonlogs"))
    ns.kubectl("delete", "pytorchjob/gone", "--wait=false")
    ns.wait_until(
        "the ConfigMap garbage-collected", lambda: not ns.exists("configmap/gone-jsonlogs"), timeout=90
    )
