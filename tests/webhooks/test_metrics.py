"""The webhook server's metrics: admission latency per operation, denials per reason and field."""

from __future__ import annotations

import copy

from flask.testing import FlaskClient
from prometheus_client import REGISTRY

from tests.builders import job
from tests.webhooks.helpers import mutated, post, validated
from webhooks.metrics import denied_field


def read(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_admission_latency_is_observed_per_webhook_and_operation(client: FlaskClient) -> None:
    name = "trainop_webhook_admission_duration_seconds_count"
    before = read(name, webhook="mutate", operation="UPDATE")
    obj = job("PyTorchJob", Master=1)
    mutated(client, obj, "UPDATE", old=copy.deepcopy(obj))
    assert read(name, webhook="mutate", operation="UPDATE") == before + 1


def test_a_denial_counts_its_reason_and_the_field_at_fault(client: FlaskClient) -> None:
    labels = {"webhook": "validate", "reason": "Invalid", "field": "spec.xgbReplicaSpecs"}
    before = read("trainop_webhook_denials_total", **labels)
    assert validated(client, job("XGBoostJob", Worker=1))["allowed"] is False
    assert read("trainop_webhook_denials_total", **labels) == before + 1


def test_an_allowed_admission_counts_no_denial(client: FlaskClient) -> None:
    before = sum(
        m.value for f in REGISTRY.collect() if f.name == "trainop_webhook_denials" for m in f.samples
    )
    assert validated(client, job("XGBoostJob", Master=1))["allowed"] is True
    after = sum(m.value for f in REGISTRY.collect() if f.name == "trainop_webhook_denials" for m in f.samples)
    assert after == before


def test_unparsable_reviews_count_as_400_without_an_operation(client: FlaskClient) -> None:
    before = read("trainop_webhook_requests_total", webhook="mutate", code="400")
    post(client, "/mutate", b"[]")
    assert read("trainop_webhook_requests_total", webhook="mutate", code="400") == before + 1


def test_denied_fields_keep_the_kinds_spec_fields() -> None:
    assert denied_field("spec.runPolicy.backoffLimit: Invalid value: -1") == "spec.runPolicy"


def test_denied_fields_drop_replica_types_and_indexes() -> None:
    message = "spec.tfReplicaSpecs[Worker].template.spec.containers[0].image: Required value"
    assert denied_field(message) == "spec.tfReplicaSpecs"


def test_denied_fields_that_a_user_can_invent_collapse_to_their_parent() -> None:
    assert denied_field("spec.madeUpField123: unknown field") == "spec"
    assert denied_field("metadata.whatever: x") == "metadata"
    assert denied_field("zzz: x") == "other"
