"""A job's TensorBoard through POST /sync as Metacontroller calls it: no Deployment while the job is
suspended (its Service and NetworkPolicy stay), the Deployment back once it resumes, and the
NetworkPolicy admitting the configured peers (docs/tensorboard.md)."""

from __future__ import annotations

import json

import pytest

from hooks.app import create_app
from tests.builders import job, with_run_policy
from tests.controller.fakes import Cluster
from trainop.admission.admit import admit
from trainop.extensions.tensorboard import ANNOTATION, INGRESS_FROM_ENV
from trainop.job.settings import Settings
from trainop.jsontypes import Json

INGRESS_NGINX = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}


def board_job(suspend: bool) -> Json:
    obj = job("PyTorchJob", name="j", namespace="ns", Master=1, Worker=2)
    obj["metadata"]["annotations"] = {ANNOTATION: "s3://experiments/run-7"}
    return admit(with_run_policy(obj, suspend=suspend)).job


def synced(cluster: Cluster) -> dict[str, set[str]]:
    """The names of each kind of child the hook server answers for the cluster's job."""
    response = (
        create_app(Settings())
        .test_client()
        .post("/sync", data=json.dumps(cluster.request()), content_type="application/json")
    )
    assert response.status_code == 200, response.data[:300]
    out: dict[str, set[str]] = {}
    for child in response.get_json()["children"]:
        out.setdefault(child["kind"], set()).add(child["metadata"]["name"])
    return out


def test_a_suspended_job_gets_no_tensorboard_deployment() -> None:
    children = synced(Cluster(board_job(suspend=True)))
    assert "Deployment" not in children
    assert "Pod" not in children


def test_a_suspended_job_keeps_its_tensorboard_service_and_network_policy() -> None:
    children = synced(Cluster(board_job(suspend=True)))
    assert "j-tensorboard" in children["Service"]
    assert children["NetworkPolicy"] == {"j-tensorboard"}


def test_a_resumed_job_gets_its_tensorboard_deployment_back() -> None:
    cluster = Cluster(board_job(suspend=True))
    cluster.sync()
    cluster.edit(suspend=False)
    assert synced(cluster)["Deployment"] == {"j-tensorboard"}


def test_the_network_policy_admits_the_configured_peers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INGRESS_FROM_ENV, json.dumps([INGRESS_NGINX]))
    cluster = Cluster(board_job(suspend=False))
    response = (
        create_app(Settings())
        .test_client()
        .post("/sync", data=json.dumps(cluster.request()), content_type="application/json")
    )
    [policy] = [c for c in response.get_json()["children"] if c["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"] == [
        {"from": [INGRESS_NGINX], "ports": [{"protocol": "TCP", "port": 6006}]}
    ]
