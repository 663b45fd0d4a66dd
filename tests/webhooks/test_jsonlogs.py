"""The `trainop.dev/log-format` annotation at admission: validated with its field named, and defaulted
from the cluster's default so the stored job says what will run (docs/json-logs.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.builders import job
from tests.webhooks.helpers import denial, mutated, validated
from trainop.extensions.jsonlogs.extension import ANNOTATION, DEFAULT_ENV, configured_default
from trainop.jsontypes import Json


def annotated(obj: Json, value: Any) -> Json:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("annotations", {})[ANNOTATION] = value
    return out


PYTORCH = job("PyTorchJob", name="digits", Master=1, Worker=2)


@pytest.mark.parametrize("value", ["json", "text"])
def test_json_and_text_are_admitted(client: FlaskClient, value: str) -> None:
    assert validated(client, annotated(PYTORCH, value))["allowed"] is True


@pytest.mark.parametrize("value", ["JSON", "yes", ""])
def test_any_other_value_is_denied_naming_the_annotation(client: FlaskClient, value: str) -> None:
    message = denial(client, annotated(PYTORCH, value))
    assert message.startswith(f'metadata.annotations[{ANNOTATION}]: Unsupported value: "{value}": ')
    assert 'supported values: "json", "text"' in message


def test_a_job_name_too_long_for_the_configmap_is_denied_with_the_longest_allowed(
    client: FlaskClient,
) -> None:
    long = job("PyTorchJob", name="a" * 60, Worker=1)
    message = denial(client, annotated(long, "json"))
    assert f'metadata.annotations[{ANNOTATION}]: Invalid value: "json"' in message
    assert "use a job name of at most 54 characters" in message


def test_changing_the_annotation_on_update_is_validated(client: FlaskClient) -> None:
    old = mutated(client, PYTORCH)
    assert validated(client, annotated(old, "xml"), "UPDATE", old)["allowed"] is False


def test_the_cluster_default_json_is_written_onto_a_job_without_the_annotation(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEFAULT_ENV, "json")
    assert mutated(client, PYTORCH)["metadata"]["annotations"] == {ANNOTATION: "json"}


def test_a_jobs_own_text_wins_over_the_cluster_default(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEFAULT_ENV, "json")
    assert mutated(client, annotated(PYTORCH, "text"))["metadata"]["annotations"] == {ANNOTATION: "text"}


def test_with_the_default_text_a_job_without_the_annotation_gets_none(
    client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEFAULT_ENV, "text")
    assert "annotations" not in mutated(client, PYTORCH)["metadata"]


def test_an_unknown_cluster_default_is_a_configuration_error_naming_the_variable() -> None:
    with pytest.raises(ValueError, match=f'{DEFAULT_ENV}=\'xml\': must be one of "json", "text"'):
        configured_default({DEFAULT_ENV: "xml"})
