"""Kubeflow parity on the real control plane: Kubeflow's Events on jobs, its MPI elastic example, the last
status differences, and no child writes when a job finishes.

Pods are driven by kwok (tests/e2e/kwok-stages.yaml); the apiserver, Metacontroller, our hooks and
webhooks are real. Events are written by the hooks' background recorder, so the checks poll.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import default_cache_dir
from trainop_stack import Namespace, job, kwok_annotations, replica

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
# Kubeflow's own examples, copied into the e2e cache by hack/build-kubeflow.sh.
KUBEFLOW_EXAMPLES = default_cache_dir() / "kubeflow" / "examples"
RUN_FOREVER = kwok_annotations(outcome=None, run_for=None)


def job_events(ns: Namespace, kind: str, name: str) -> list[dict[str, Any]]:
    items = ns.items("events")
    return [
        e
        for e in items
        if e["involvedObject"].get("kind") == kind and e["involvedObject"].get("name") == name
    ]


def wait_events(
    ns: Namespace, kind: str, name: str, expected: set[tuple[str, str, str]], timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Wait until the job's events include every (type, reason, message); returns all of them."""
    found: list[dict[str, Any]] = []

    def check() -> bool:
        nonlocal found
        found = job_events(ns, kind, name)
        return expected <= {(e["type"], e["reason"], e["message"]) for e in found}

    try:
        ns.wait_until(f"events of {kind}/{name}", check, timeout)
    except AssertionError as e:
        seen = sorted((x["type"], x["reason"], x["message"]) for x in found)
        raise AssertionError(f"{e}; missing {expected - set(seen)}; seen {seen}") from None
    return found


def test_a_succeeding_job_has_kubeflows_events(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "ddp",
            {
                "Master": replica("PyTorchJob", annotations=kwok_annotations(run_for="3s")),
                "Worker": replica("PyTorchJob", replicas=2, annotations=RUN_FOREVER),
            },
        )
    )
    ns.wait_for("pytorchjob/ddp", "Succeeded", timeout=60)
    names = ("ddp-master-0", "ddp-worker-0", "ddp-worker-1")
    expected = {("Normal", "SuccessfulCreatePod", f"Created pod: {n}") for n in names}
    expected |= {("Normal", "SuccessfulCreateService", f"Created service: {n}") for n in names}
    expected |= {
        ("Normal", "ExitedWithCode", f"Pod: {ns.name}.ddp-master-0 exited with code 0"),
        ("Normal", "PyTorchJobSucceeded", "PyTorchJob ddp is successfully completed."),
    }
    events = wait_events(ns, "PyTorchJob", "ddp", expected)
    uid = ns.get("pytorchjob/ddp")["metadata"]["uid"]
    for event in events:
        assert event["source"] == {"component": "pytorchjob-controller"}
        assert event["involvedObject"]["uid"] == uid
        assert event["count"] == 1
    keys = [(e["type"], e["reason"], e["message"]) for e in events]
    assert len(keys) == len(set(keys)), "one object per distinct event"
    described = ns.kubectl("describe", "pytorchjob/ddp").stdout
    assert "SuccessfulCreatePod" in described and "Events:  <none>" not in described


def test_a_recreated_pod_aggregates_into_one_event_with_count_two(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "retry",
            {"Master": replica("PyTorchJob", restart_policy="ExitCode", annotations=RUN_FOREVER)},
            run_policy={"backoffLimit": 1},
        )
    )
    ns.wait_phase("retry-master-0", "Running", timeout=60)
    ns.kubectl(
        "annotate", "pod/retry-master-0", "--overwrite",
        "e2e.kwok.io/outcome=Failed", "e2e.kwok.io/exit-code=137", "e2e.kwok.io/run-for=100ms",
    )  # fmt: skip
    expected = {
        ("Warning", "PyTorchJobRestarting", "job retry is restarting because Master replica(s) failed."),
        ("Normal", "SuccessfulDeletePod", "Deleted pod: retry-master-0"),
        ("Normal", "ExitedWithCode", f"Pod: {ns.name}.retry-master-0 exited with code 137"),
    }
    wait_events(ns, "PyTorchJob", "retry", expected)

    def created_twice() -> bool:
        created = [
            e for e in job_events(ns, "PyTorchJob", "retry") if e["message"] == "Created pod: retry-master-0"
        ]
        return len(created) == 1 and created[0]["count"] == 2

    ns.wait_until("one 'Created pod' event with count 2", created_twice, timeout=60)
    # backoffLimit 1 allowed this one restart: the job is not failed and its pod is a new one.
    assert ns.condition("pytorchjob/retry", "Failed") is None
    ns.wait_phase("retry-master-0", "Running", timeout=60)


def test_a_forged_sync_records_no_event(namespace: Namespace) -> None:
    ns = namespace
    forged = job("JAXJob", "ghost", {"Worker": replica("JAXJob")})
    forged["metadata"].update(namespace=ns.name, uid="00000000-0000-0000-0000-000000000000")
    body = json.dumps({"parent": forged, "children": {}, "finalizing": False}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{ns.stack.hook_port}/sync",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    # a real job in the same namespace: once its events are there, the forged batch has been handled too
    ns.apply(job("JAXJob", "real", {"Worker": replica("JAXJob", annotations=RUN_FOREVER)}))
    wait_events(ns, "JAXJob", "real", {("Normal", "SuccessfulCreatePod", "Created pod: real-worker-0")})
    assert job_events(ns, "JAXJob", "ghost") == []


def test_the_hooks_role_allows_creating_and_patching_events_only(namespace: Namespace) -> None:
    ns = namespace
    docs = [d for d in yaml.safe_load_all((REPO / "manifests" / "rbac-jobs.yaml").read_text()) if d]
    role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "trainop-hooks")
    name = f"e2e-hooks-{ns.name}"
    role["metadata"] = {"name": name}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns.name}],
    }
    ns.apply(role)
    ns.apply(binding)
    who = f"--as=system:serviceaccount:{ns.name}:default"

    def can(verb: str, resource: str) -> bool:
        res = ns.kubectl("auth", "can-i", verb, resource, who, check=False)
        return res.stdout.strip() == "yes"

    try:
        ns.wait_until("the role to take effect", lambda: can("create", "events"), timeout=30)
        assert can("patch", "events")
        assert not can("get", "events") and not can("delete", "events") and not can("list", "events")
        assert can("get", "pytorchjobs.kubeflow.org") and not can("create", "pods")
    finally:
        ns.stack.kubectl("delete", "clusterrole", name, "--ignore-not-found", check=False)


def test_kubeflows_mpi_elastic_example_is_admitted_and_succeeds(namespace: Namespace) -> None:
    ns = namespace
    example = yaml.safe_load((KUBEFLOW_EXAMPLES / "mpi" / "tensorflow-mnist-elastic.yaml").read_text())
    specs = example["spec"]["mpiReplicaSpecs"]
    specs["Launcher"]["template"].setdefault("metadata", {})["annotations"] = kwok_annotations(run_for="3s")
    specs["Worker"]["template"].setdefault("metadata", {})["annotations"] = RUN_FOREVER
    ns.apply(example)
    name = example["metadata"]["name"]
    ns.wait_for(f"mpijob/{name}", "Succeeded", timeout=90)
    status = ns.get(f"mpijob/{name}")["status"]
    assert status["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}
    launcher = ns.get(f"pod/{name}-launcher")
    env = {e["name"] for e in launcher["spec"]["containers"][0].get("env", [])}
    assert "OMPI_MCA_plm_rsh_agent" in env  # Kubeflow's env goes into the first container, "mpi-launcher"
    data = ns.get(f"configmap/{name}-config")["data"]
    assert not data["kubexec.sh"].endswith("\n")
    assert data["discover_hosts.sh"].startswith("#!/bin/sh") and not data["discover_hosts.sh"].endswith("\n")
    expected = {
        ("Normal", "MPIJobRunning", f"launcher pod created success: {name}-launcher"),
        ("Normal", "SuccessfulCreatePod", f"Created worker pod: {name}-worker-0"),
        ("Normal", "mpijobsSucceeded", f"MPIJob {ns.name}/{name} successfully completed."),
    }
    wait_events(ns, "MPIJob", name, expected)


def test_worker_only_pytorch_messages_name_the_namespace(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "solo",
            {"Worker": replica("PyTorchJob", annotations=kwok_annotations(run_for="3s"))},
        )
    )
    ns.wait_until(
        "Running condition",
        lambda: (ns.condition("pytorchjob/solo", "Running") or {}).get("status") == "True",
        timeout=60,
    )
    assert ns.condition("pytorchjob/solo", "Running")["message"] == f"PyTorchJob {ns.name}/solo is running."
    ns.wait_for("pytorchjob/solo", "Succeeded", timeout=60)
    message = ns.condition("pytorchjob/solo", "Succeeded")["message"]
    assert message == f"PyTorchJob {ns.name}/solo successfully completed."


def test_a_job_created_suspended_has_no_replica_statuses(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(job("JAXJob", "held", {"Worker": replica("JAXJob", replicas=2)}, run_policy={"suspend": True}))
    ns.wait_for("jaxjob/held", "Suspended", timeout=60)
    assert "replicaStatuses" not in ns.get("jaxjob/held")["status"]
    wait_events(ns, "JAXJob", "held", {("Normal", "JAXJobSuspended", "JAXJob held is suspended.")})


def test_finishing_a_job_writes_no_child(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "quiet",
            {
                "Master": replica("PyTorchJob", annotations=kwok_annotations(run_for="4s")),
                "Worker": replica("PyTorchJob", replicas=3, annotations=RUN_FOREVER),
            },
        )
    )
    names = {"quiet-master-0", "quiet-worker-0", "quiet-worker-1", "quiet-worker-2"}
    ns.wait_children("services", "quiet", names)
    ns.wait_until(
        "Running condition",
        lambda: (ns.condition("pytorchjob/quiet", "Running") or {}).get("status") == "True",
        timeout=60,
    )
    before = {n: s["metadata"]["resourceVersion"] for n, s in ns.job_children("services", "quiet").items()}
    ns.wait_for("pytorchjob/quiet", "Succeeded", timeout=60)
    # More syncs of the finished job: each annotation change of the parent triggers one.
    for i in range(3):
        ns.kubectl("annotate", "pytorchjob/quiet", "--overwrite", f"e2e/poke={i}")
    wait_events(
        ns,
        "PyTorchJob",
        "quiet",
        {("Normal", "PyTorchJobSucceeded", "PyTorchJob quiet is successfully completed.")},
    )
    # Give those syncs time to write, were they going to: the versions must hold for a few seconds.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        after = {n: s["metadata"]["resourceVersion"] for n, s in ns.job_children("services", "quiet").items()}
        assert after == before, "a Service was written after the job finished"
        time.sleep(0.5)
