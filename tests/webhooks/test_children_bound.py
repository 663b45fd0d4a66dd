"""What one job may imply: the bytes of the children its sync answers with, bounded at admission."""

from __future__ import annotations

import orjson
import pytest
from flask.testing import FlaskClient

from tests.builders import T0, job
from tests.controller.fakes import Cluster
from tests.largest_jobs import realistic_job
from tests.realistic import training_job
from tests.webhooks.helpers import denial, validated
from trainop.admission.admit import admit
from trainop.admission.validation import (
    MAX_CHILD_BYTES,
    MAX_CHILDREN_BYTES,
    implied_children_bytes,
    largest_extra_child_bytes,
)
from trainop.controller.sync import sync
from trainop.frameworks import framework
from trainop.job.settings import Settings
from trainop.jsontypes import Json

# One job of every kind, of ~1000 pods.
WIDE = {
    "TFJob": dict(Chief=1, PS=4, Worker=995),
    "PyTorchJob": dict(Master=1, Worker=999),
    "XGBoostJob": dict(Master=1, Worker=999),
    "MPIJob": dict(Launcher=1, Worker=999),
    "PaddleJob": dict(Master=1, Worker=999),
    "JAXJob": dict(Worker=1000),
    "MXJob": dict(Scheduler=1, Server=10, Worker=990),
}


def children_bytes(obj: Json) -> int:
    # The second sync: the pods that mount a ConfigMap of the job wait for the first to create it.
    cluster = Cluster(obj)
    cluster.sync()
    return len(orjson.dumps(cluster.sync().response()["children"]))


def estimate(obj: Json) -> int:
    return implied_children_bytes(framework(obj["kind"]), admit(obj).job)


@pytest.mark.parametrize("kind", sorted(WIDE))
def test_the_estimate_bounds_the_children_from_above_within_half_again(kind: str) -> None:
    obj = job(kind, name="wide", namespace="team-a", **WIDE[kind])
    real = children_bytes(obj)
    assert real <= estimate(obj) <= 1.5 * real


def test_a_1000_replica_tfjob_as_the_benches_run_it_is_admissible(client: FlaskClient) -> None:
    obj = training_job("TFJob", 1000)
    assert validated(client, obj)["allowed"] is True
    assert children_bytes(obj) > 0


def test_a_small_tfjob_of_5000_workers_is_denied_with_the_field_and_what_fits(client: FlaskClient) -> None:
    message = denial(client, job("TFJob", name="wide", Worker=5000))
    assert message.startswith(
        "spec.tfReplicaSpecs[Worker].replicas: Invalid value: 5000: the job's 5000 pods and their Services "
        "would take ~"
    )
    assert "over the 48 MiB one job may imply" in message
    assert "use at most 11" in message
    assert "Worker replicas per job (split the training into several jobs)" in message


def test_the_largest_admissible_tfjob_is_admitted_and_one_more_worker_is_denied(client: FlaskClient) -> None:
    message = denial(client, job("TFJob", name="wide", Worker=5000))
    fits = int(message.split("use at most ")[1].split()[0])
    assert validated(client, job("TFJob", name="wide", Worker=fits))["allowed"] is True
    assert denial(client, job("TFJob", name="wide", Worker=fits + 1)).startswith(
        f"spec.tfReplicaSpecs[Worker].replicas: Invalid value: {fits + 1}:"
    )
    assert children_bytes(job("TFJob", name="wide", Worker=fits)) <= MAX_CHILDREN_BYTES


def test_xgboost_workers_are_bounded_by_their_worker_addresses(client: FlaskClient) -> None:
    message = denial(client, job("XGBoostJob", name="wide", Master=1, Worker=5000))
    assert message.startswith("spec.xgbReplicaSpecs[Worker].replicas: Invalid value: 5000:")


def test_10000_pytorch_workers_stay_admissible(client: FlaskClient) -> None:
    # PyTorch's environment names only the master: its answer is linear in the replicas.
    assert validated(client, job("PyTorchJob", name="wide", Master=1, Worker=9999))["allowed"] is True


def test_a_job_with_other_errors_reports_those_alone(client: FlaskClient) -> None:
    message = denial(client, job("TFJob", name="n" * 53, Worker=5000))
    assert message.startswith('metadata.name: Invalid value: "' + "n" * 53)
    assert "sync answer" not in message


def test_a_job_that_skipped_the_webhook_fails_validation_in_the_sync_without_children() -> None:
    result = sync(job("TFJob", name="wide", Worker=5000), {}, Settings(), T0)
    failed = [c for c in result.status["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["reason"] == "TFJobFailedValidation"
    assert "spec.tfReplicaSpecs[Worker].replicas" in failed[0]["message"]
    assert result.children == []


def test_a_template_the_framework_cannot_read_is_answered_not_a_crash(client: FlaskClient) -> None:
    # Found by tests/webhooks/test_fuzz.py: validation does not look inside templates, the estimate does.
    obj = job("JAXJob", name="j", Worker=2)
    obj["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = [1.5]
    assert validated(client, obj)["allowed"] is True


def test_an_mpijob_whose_configmap_could_never_be_created_is_denied_with_the_most_workers_that_fit(
    client: FlaskClient,
) -> None:
    # Its hostfile and discover_hosts.sh name every worker: past 240 KiB Metacontroller's copy of the
    # ConfigMap in an annotation is over the apiserver's 256 KiB, and the job would never start.
    wide = realistic_job("MPIJob", 10_000)
    message = denial(client, wide)
    assert "spec.mpiReplicaSpecs[Worker].replicas: Invalid value: 10000: the job's ConfigMap" in message
    most = int(message.split("use at most ")[1].split()[0])
    assert 4000 < most < 10_000
    assert validated(client, realistic_job("MPIJob", most))["allowed"] is True
    assert not admit(realistic_job("MPIJob", most + 1)).checks.ok


def test_the_measure_of_an_mpijobs_configmap_is_at_least_what_its_sync_writes_once_workers_run() -> None:
    obj = admit(realistic_job("MPIJob", 1000)).job
    cluster = Cluster(obj)
    for _ in range(3):
        cluster.sync()
    cluster.run()
    children = cluster.sync().response()["children"]
    config = next(c for c in children if c["kind"] == "ConfigMap")
    measured = largest_extra_child_bytes(framework("MPIJob"), obj)[0]
    assert len(orjson.dumps(config)) <= measured <= MAX_CHILD_BYTES
