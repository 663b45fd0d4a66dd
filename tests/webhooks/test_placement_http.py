"""Placement annotations through /mutate and /validate, as the apiserver calls them."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.builders import container, job, replica
from tests.webhooks.helpers import denial, mutated, validated

PLACEMENT = "trainop.dev/placement"


def tfjob(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    out = job("TFJob", name="j", PS=replica("TFJob", 2, [container("tensorflow")]), Worker=3)
    if annotations:
        out["metadata"]["annotations"] = annotations
    return out


def test_mutate_writes_the_terms_into_the_stored_template(client: FlaskClient) -> None:
    stored = mutated(client, tfjob({f"{PLACEMENT}.PS": "spread"}))
    affinity = stored["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["affinity"]
    [term] = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["matchLabelKeys"] == ["training.kubeflow.org/job-name", "training.kubeflow.org/replica-type"]
    assert "affinity" not in stored["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]


def test_validate_denies_a_bad_policy_naming_the_annotation(client: FlaskClient) -> None:
    message = denial(client, tfjob({f"{PLACEMENT}.Worker": "pack"}))
    assert f"metadata.annotations[{PLACEMENT}.Worker]" in message
    assert "needs a node label" in message


def test_validate_admits_a_hard_rule_with_a_warning(client: FlaskClient) -> None:
    response = validated(client, tfjob({f"{PLACEMENT}.Worker": "spread"}))
    assert response["allowed"] is True
    assert any("3 Worker pods need 3 nodes" in w for w in response["warnings"])


def test_cluster_defaults_are_written_onto_the_job(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINOP_PLACEMENT_DEFAULTS", "PS=spread-preferred")
    stored = mutated(client, tfjob())
    assert stored["metadata"]["annotations"] == {f"{PLACEMENT}.PS": "spread-preferred"}
    ps = stored["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in ps["affinity"]["podAntiAffinity"]


def test_a_job_without_placement_and_no_defaults_is_not_touched(client: FlaskClient) -> None:
    stored = mutated(client, tfjob())
    for rtype in ("PS", "Worker"):
        assert "affinity" not in stored["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]
    assert "annotations" not in stored["metadata"]
