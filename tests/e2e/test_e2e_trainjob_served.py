"""TrainJobs served by trainop: the real Metacontroller calls the hook server's customize and sync hooks,
the real JobSet controller runs the JobSet the hook answers, the Job controller makes the pods and kwok
runs them to the outcome their annotations ask for (tests/e2e/kwok-stages.yaml).

Trainer's controller is not running here (tests/e2e/test_e2e_trainjob_status.py runs it alone): the
CRDs are trainop's own (trainop.install.trainer_crds), and the TrainJob CompositeController exists only
while this module runs, so no other module's TrainJobs have two controllers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jobset_controller import jobset_dir, running_jobset
from kwok_trainjobs import kwok_job, kwok_runtime
from trainop_stack import IMAGE, Namespace, TrainopStack, kwok_annotations

from trainop.examples import example, examples
from trainop.install.manifests import (
    TRAINJOB_CONTROLLER,
    TRAINJOB_METACONTROLLER_RULES,
    trainjob_composite_controller,
)
from trainop.install.trainer_crds import trainer_crds
from trainop.trainjob.migrate import POLICY_OF, migrate

pytestmark = pytest.mark.e2e

Json = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def served(stack: TrainopStack) -> Iterator[None]:
    cp = stack.cp
    cp.apply_crds(*sorted((jobset_dir() / "crds").glob("*.yaml")))
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": trainer_crds()})
    refs = cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", "-o", "name", input=listed)
    cp.wait_established(refs.stdout.split())
    # Metacontroller runs with the chart's ClusterRole (TrainopStack.narrowed_metacontroller): the
    # TrainJob controller's rules are granted beside it for this module only.
    grant = metacontroller_grant()
    cp.apply(json.dumps(grant))
    with running_jobset(cp):
        log = stack.process("metacontroller").log_path
        offset = log.stat().st_size
        controller = trainjob_composite_controller(f"http://127.0.0.1:{stack.hook_port}")
        cp.apply(json.dumps(controller))
        try:
            cp.wait_until(
                "the TrainJob CompositeController started", lambda: synced(log, offset), timeout=120
            )
            yield
        finally:
            cp.kubectl(
                "delete", "compositecontroller", TRAINJOB_CONTROLLER, "--ignore-not-found", check=False
            )


def metacontroller_grant() -> Json:
    name = "e2e-metacontroller-trainjobs"
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": [dict(rule) for rule in TRAINJOB_METACONTROLLER_RULES],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [
                    {
                        "kind": "ServiceAccount",
                        "name": "e2e-metacontroller",
                        "namespace": "e2e-metacontroller",
                    }
                ],
            },
        ],
    }


def synced(log: Path, offset: int) -> bool:
    """Whether Metacontroller's log, from ``offset``, says the TrainJob controller's caches synced (its
    workers start then)."""
    with log.open("rb") as fh:
        fh.seek(offset)
        text = fh.read().decode(errors="replace")
    return any('"Caches are synced","controller":"TrainJob"' in line for line in text.splitlines())


def conditions(ns: Namespace, name: str = "train") -> dict[str, str]:
    status = ns.get(f"trainjob/{name}").get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def test_a_trainjob_runs_as_a_jobset_of_its_runtime_and_completes(namespace: Namespace) -> None:
    namespace.apply(kwok_runtime(kwok_annotations(outcome="Succeeded", run_for="1s")))
    namespace.create(kwok_job())
    namespace.wait_until(
        "the TrainJob Complete", lambda: conditions(namespace).get("Complete") == "True", timeout=120
    )
    job = namespace.get("trainjob/train")
    jobset = namespace.get("jobset/train")
    snapshot = namespace.get("configmap/train-runtime-snapshot")
    uid = job["metadata"]["uid"]
    for child in (jobset, snapshot):
        owners = child["metadata"]["ownerReferences"]
        assert [(o["kind"], o["uid"], o.get("controller")) for o in owners] == [("TrainJob", uid, True)]
    assert job["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    pods = namespace.items("pods", "jobset.sigs.k8s.io/jobset-name=train")
    assert len(pods) == 2
    assert {p["status"]["phase"] for p in pods} == {"Succeeded"}


def test_a_trainjob_whose_pods_fail_is_failed(namespace: Namespace) -> None:
    namespace.apply(kwok_runtime(kwok_annotations(outcome="Failed", run_for="1s", exit_code=1)))
    namespace.create(kwok_job())
    namespace.wait_until(
        "the TrainJob Failed", lambda: conditions(namespace).get("Failed") == "True", timeout=120
    )
    failed = next(c for c in namespace.get("trainjob/train")["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailedJobs"


def test_a_suspended_trainjob_has_a_suspended_jobset_and_runs_once_resumed(namespace: Namespace) -> None:
    namespace.apply(kwok_runtime(kwok_annotations(outcome="Succeeded", run_for="1s")))
    namespace.create(kwok_job(suspend=True))
    namespace.wait_until(
        "the TrainJob Suspended", lambda: conditions(namespace).get("Suspended") == "True", timeout=60
    )
    assert namespace.get("jobset/train")["spec"]["suspend"] is True
    assert namespace.items("pods", "jobset.sigs.k8s.io/jobset-name=train") == []
    namespace.kubectl("patch", "trainjob", "train", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    namespace.wait_until(
        "the TrainJob Complete", lambda: conditions(namespace).get("Complete") == "True", timeout=120
    )
    assert conditions(namespace)["Suspended"] == "False"


def test_a_trainjob_of_a_missing_runtime_gets_its_jobset_once_the_runtime_exists(
    stack: TrainopStack, namespace: Namespace
) -> None:
    hooks_log = stack.process("hooks").log_path
    namespace.create(kwok_job())
    said = "TrainingRuntime 'kwok' not found"

    def refused() -> bool:
        lines = hooks_log.read_text(errors="replace").splitlines()
        return any(namespace.name in line and said in line for line in lines)

    namespace.wait_until("the hook's sync found no runtime", refused, timeout=30)
    assert not namespace.exists("jobset/train")
    namespace.apply(kwok_runtime(kwok_annotations(outcome="Succeeded", run_for="1s")))
    namespace.wait_until(
        "the TrainJob Complete once its runtime exists",
        lambda: conditions(namespace).get("Complete") == "True",
        timeout=120,
    )


def test_kubeflows_sdk_lists_the_runtime_trains_and_waits_for_completion(
    stack: TrainopStack, namespace: Namespace
) -> None:
    from kubeflow.trainer import CustomTrainerContainer, KubernetesBackendConfig, TrainerClient

    # Cluster-scoped, so named for the test's namespace and removed after it.
    name = f"kwok-{namespace.name}"
    rt = kwok_runtime(kwok_annotations(outcome="Succeeded", run_for="1s"), name=name)
    rt["kind"] = "ClusterTrainingRuntime"
    rt["metadata"]["labels"] = {"trainer.kubeflow.org/framework": "torch"}
    stack.cp.apply(json.dumps(rt))
    try:
        client = TrainerClient(
            KubernetesBackendConfig(namespace=namespace.name, config_file=str(stack.kubeconfig))
        )
        runtime = next(r for r in client.list_runtimes() if r.name == name)
        assert (runtime.trainer.framework, runtime.trainer.image) == ("torch", IMAGE)
        job = client.train(runtime=runtime, trainer=CustomTrainerContainer(image=IMAGE, num_nodes=2))
        done = client.wait_for_job_status(job, {"Complete"}, timeout=120, polling_interval=1)
        assert sorted(step.name for step in done.steps) == ["node-0", "node-1"]
        assert {step.status for step in done.steps} == {"Succeeded"}
        assert [j.name for j in client.list_jobs()] == [job]
        client.delete_job(job)
    finally:
        stack.cp.kubectl("delete", "clustertrainingruntime", name, "--ignore-not-found", check=False)


@pytest.mark.parametrize("name", [e.name for e in examples() if e.kind in POLICY_OF])
def test_a_migrated_example_is_taken_by_the_apiserver_as_it_is(namespace: Namespace, name: str) -> None:
    for obj in migrate(example(name).job).objects:
        obj["metadata"]["namespace"] = namespace.name
        namespace.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj))
