"""Status details measured against Kubeflow v1.9.4 itself (tests/differential): messages, MPI replica
statuses, and no child writes when a job finishes."""

from __future__ import annotations

import json

import pytest

from tests.builders import job, with_run_policy
from tests.controller.fakes import LAST_APPLIED, Cluster


def finished_cluster(job_spec: dict, leaders: tuple[str, ...], fail: bool = False) -> Cluster:
    cluster = Cluster(job_spec)
    cluster.sync()
    cluster.sync()  # an MPI launcher waits for its ServiceAccount
    cluster.run()
    cluster.sync(5)
    cluster.updated.clear()
    if fail:
        cluster.fail(*leaders)
    else:
        cluster.succeed(*leaders)
    cluster.sync(5)
    return cluster


@pytest.mark.parametrize("kind", ["PyTorchJob", "PaddleJob"])
def test_worker_only_jobs_name_namespace_and_job_when_running(kind: str) -> None:
    cluster = Cluster(job(kind, name="j", namespace="ns", Worker=2))
    cluster.sync()
    cluster.run()
    cluster.sync(5)
    assert cluster.condition("Running")["message"] == f"{kind} ns/j is running."


@pytest.mark.parametrize("kind", ["PyTorchJob", "PaddleJob"])
def test_worker_only_jobs_say_successfully_completed_with_namespace(kind: str) -> None:
    cluster = finished_cluster(job(kind, name="j", namespace="ns", Worker=2), ("j-worker-0", "j-worker-1"))
    assert cluster.condition("Succeeded")["message"] == f"{kind} ns/j successfully completed."


@pytest.mark.parametrize("kind", ["PyTorchJob", "PaddleJob"])
def test_jobs_with_a_master_keep_the_short_messages(kind: str) -> None:
    cluster = finished_cluster(job(kind, name="j", namespace="ns", Master=1, Worker=1), ("j-master-0",))
    assert cluster.condition("Succeeded")["message"] == f"{kind} j is successfully completed."


def test_mpi_workers_report_an_empty_status_once_the_launcher_succeeded() -> None:
    cluster = finished_cluster(job("MPIJob", name="j", Launcher=1, Worker=2), ("j-launcher",))
    assert cluster.status["replicaStatuses"] == {"Launcher": {"succeeded": 1}, "Worker": {}}


def test_mpi_launcher_failure_has_kubeflows_doubled_reason_and_empty_workers() -> None:
    cluster = finished_cluster(job("MPIJob", name="j", Launcher=1, Worker=2), ("j-launcher",), fail=True)
    failed = cluster.condition("Failed")
    assert (failed["reason"], failed["message"]) == (
        "MPIJobMPIJobFailed",
        "MPIJob j is failed because 1 Launcher replica(s) failed.",
    )
    assert cluster.status["replicaStatuses"] == {"Launcher": {"failed": 1}, "Worker": {}}


@pytest.mark.parametrize(
    ("job_spec", "leaders"),
    [
        (job("PyTorchJob", name="j", Master=1, Worker=3), ("j-master-0",)),
        (job("TFJob", name="j", Chief=1, PS=1, Worker=2), ("j-chief-0",)),
        (job("MPIJob", name="j", Launcher=1, Worker=2), ("j-launcher",)),
    ],
    ids=["PyTorchJob", "TFJob", "MPIJob"],
)
def test_finishing_a_job_updates_no_child(job_spec: dict, leaders: tuple[str, ...]) -> None:
    cluster = finished_cluster(job_spec, leaders)
    cluster.fail(*[n for n in cluster.pod_names() if n not in leaders], exit_code=137)
    for _ in range(3):
        cluster.sync(5)
    assert cluster.state() == "Succeeded"
    assert cluster.updated == []


def test_clean_pod_policy_all_deletes_and_writes_nothing_else() -> None:
    job_spec = with_run_policy(job("PyTorchJob", name="j", Master=1, Worker=2), cleanPodPolicy="All")
    cluster = finished_cluster(job_spec, ("j-master-0",))
    cluster.deleted.clear()
    cluster.sync(5)
    cluster.sync(5)
    assert cluster.updated == []
    assert sorted(cluster.deleted) == sorted(["j-master-0", "j-worker-0", "j-worker-1"] * 2)


def test_a_finished_jobs_service_comes_back_exactly_as_last_applied() -> None:
    cluster = finished_cluster(job("PyTorchJob", name="j", Master=1, Worker=1), ("j-master-0",))
    result = cluster.sync(5)
    returned = next(
        o for o in result.children if o["kind"] == "Service" and o["metadata"]["name"] == "j-worker-0"
    )
    applied = json.loads(cluster.services()["j-worker-0"]["metadata"]["annotations"][LAST_APPLIED])
    assert returned == applied
    assert "clusterIPs" not in returned["spec"]


def test_a_child_without_last_applied_comes_back_with_only_the_fields_we_own() -> None:
    cluster = finished_cluster(job("PyTorchJob", name="j", Master=1, Worker=1), ("j-master-0",))
    del cluster.services()["j-worker-0"]["metadata"]["annotations"][LAST_APPLIED]
    result = cluster.sync(5)
    returned = next(
        o for o in result.children if o["kind"] == "Service" and o["metadata"]["name"] == "j-worker-0"
    )
    assert set(returned) == {"apiVersion", "kind", "metadata", "spec"}
    assert "uid" not in returned["metadata"] and "ownerReferences" not in returned["metadata"]
