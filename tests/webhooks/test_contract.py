"""The AdmissionReview v1 contract and the HTTP edges of the webhook server.

The contract: docs/design.md#admissionreview-contract.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.builders import admission_review, job
from tests.webhooks.helpers import post, review_response
from trainop.jsontypes import Json
from webhooks import admission
from webhooks.app import DEFAULT_MAX_BODY_BYTES, MAX_BODY_CONFIG, create_app

ROUTES = ["/mutate", "/validate"]


def review(**request_changes: Any) -> Json:
    body = admission_review(job("PyTorchJob", Master=1, Worker=1))
    body["request"].update(request_changes)
    return body


def without(body: Json, *path: str) -> Json:
    node = body
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return body


@pytest.mark.parametrize("path", ROUTES)
def test_the_response_echoes_the_request_uid_and_review_type(client: FlaskClient, path: str) -> None:
    status, body = post(client, path, review(uid="3f6a-uid"))
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == "3f6a-uid"
    assert "request" not in body


def test_a_denial_carries_code_422_reason_invalid_and_the_field_errors(client: FlaskClient) -> None:
    response = review_response(client, "/validate", admission_review(job("XGBoostJob", Worker=1)))
    assert response["allowed"] is False
    assert response["status"] == {
        "status": "Failure",
        "code": 422,
        "reason": "Invalid",
        "message": "spec.xgbReplicaSpecs: Required value: must contain exactly one Master (found none); "
        "add a Master replica spec",
    }


def test_dry_run_is_answered_like_any_other_request(client: FlaskClient) -> None:
    # The webhooks have no side effects (sideEffects: None), so dryRun changes nothing.
    plain = review_response(client, "/mutate", review(uid="a"))
    dry = review_response(client, "/mutate", review(uid="a", dryRun=True))
    assert dry == plain


BAD_BODIES: list[tuple[str, bytes | Json, str]] = [
    ("malformed JSON", b'{"apiVersion": "admission.k8s.io/v1", ', "body is not valid JSON"),
    ("empty body", b"", "body is not valid JSON"),
    ("NaN is not JSON", b'{"a": NaN}', "body is not valid JSON"),
    ("not an object", b"[1, 2]", "body must be a JSON object (an AdmissionReview), got array"),
    (
        "v1beta1 review",
        review() | {"apiVersion": "admission.k8s.io/v1beta1"},
        'expected apiVersion "admission.k8s.io/v1"',
    ),
    ("wrong kind", review() | {"kind": "TokenReview"}, 'kind "AdmissionReview"'),
    ("missing request", without(review(), "request"), "missing request"),
    ("request not an object", review() | {"request": "x"}, "missing request"),
    ("missing uid", without(review(), "request", "uid"), "missing request.uid"),
    ("empty uid", review(uid=""), "missing request.uid"),
    ("missing object", without(review(), "request", "object"), "missing request.object"),
    ("null object", review(object=None), "missing request.object"),
    ("object not an object", review(object=[1]), "request.object must be a JSON object, got array"),
    ("update without oldObject", review(operation="UPDATE"), "missing request.oldObject"),
    ("unknown operation", review(operation="PATCH"), "request.operation must be one of"),
    (
        "nested too deeply",
        review(object={"kind": "TFJob", "x": json.loads("[" * 150 + "]" * 150)}),
        "nested deeper",
    ),
]


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize(("case", "body", "reason"), BAD_BODIES, ids=[c[0] for c in BAD_BODIES])
def test_a_body_that_is_not_a_usable_admission_review_gets_400_with_a_one_line_reason(
    client: FlaskClient, path: str, case: str, body: bytes | Json, reason: str
) -> None:
    status, answer = post(client, path, body)
    assert status == 400
    assert reason in answer["error"]
    assert "\n" not in answer["error"]


@pytest.mark.parametrize("path", ROUTES)
def test_an_unknown_kind_gets_400_naming_the_supported_kinds(client: FlaskClient, path: str) -> None:
    body = review()
    body["request"]["object"]["kind"] = "SparkJob"
    status, answer = post(client, path, body)
    assert status == 400
    assert answer["error"] == (
        "request.object.kind: unsupported kind 'SparkJob'; this webhook serves "
        "TFJob, PyTorchJob, XGBoostJob, MPIJob, PaddleJob, JAXJob, MXJob (kubeflow.org/v1)"
    )


def test_request_kind_contradicting_the_object_kind_gets_400(client: FlaskClient) -> None:
    body = review(kind={"group": "kubeflow.org", "version": "v1", "kind": "TFJob"})
    status, answer = post(client, "/validate", body)
    assert status == 400
    assert "does not match request.object.kind 'PyTorchJob'" in answer["error"]


@pytest.mark.parametrize("path", ROUTES)
def test_a_body_over_the_limit_gets_413(path: str) -> None:
    small = create_app(max_body_bytes=1024).test_client()
    status, answer = post(small, path, review() | {"padding": "x" * 2048})
    assert status == 413
    assert answer == {"error": "request body exceeds the webhook's limit of 1024 bytes"}


@pytest.mark.parametrize(("size", "expected"), [(1024, 400), (1025, 413)])
def test_the_limit_is_inclusive(size: int, expected: int) -> None:
    # 400 because the padding is not an AdmissionReview; what matters is that it was read, not refused.
    small = create_app(max_body_bytes=1024).test_client()
    assert post(small, "/validate", b" " * size)[0] == expected


def test_the_body_limit_defaults_to_8_mib_and_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert create_app().config[MAX_BODY_CONFIG] == DEFAULT_MAX_BODY_BYTES == 8 * 1024 * 1024
    monkeypatch.setenv("TRAINOP_WEBHOOK_MAX_BODY_BYTES", "4096")
    assert create_app().config[MAX_BODY_CONFIG] == 4096
    monkeypatch.setenv("TRAINOP_WEBHOOK_MAX_BODY_BYTES", "lots")
    message = "TRAINOP_WEBHOOK_MAX_BODY_BYTES: expected a positive number of bytes"
    with pytest.raises(ValueError, match=message):
        create_app()


def test_healthz_answers_200(client: FlaskClient) -> None:
    resp = client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json == {"status": "ok"}


@pytest.mark.parametrize(("method", "path", "code"), [("get", "/mutate", 405), ("post", "/nowhere", 404)])
def test_other_routes_and_methods_answer_json_4xx(
    client: FlaskClient, method: str, path: str, code: int
) -> None:
    resp = getattr(client, method)(path)
    assert resp.status_code == code
    assert resp.mimetype == "application/json"
    assert resp.json["error"]


@pytest.mark.parametrize("path", ROUTES)
def test_a_bug_in_the_webhook_is_answered_as_a_denial_not_an_http_500(
    monkeypatch: pytest.MonkeyPatch, client: FlaskClient, path: str
) -> None:
    def broken(job: Json, old: Json | None = None) -> Json:
        raise KeyError("boom")

    monkeypatch.setattr(admission, "admit", broken)
    status, body = post(client, path, review(uid="u-1"))
    assert status == 200
    assert body["response"]["uid"] == "u-1"
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["code"] == 500
    assert body["response"]["status"]["reason"] == "InternalError"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[Json] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(record.getMessage()))


@pytest.fixture
def log_lines() -> Iterator[list[Json]]:
    handler = Records()
    logger = logging.getLogger("trainop.webhooks")
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)


def test_each_admission_request_logs_one_json_line(client: FlaskClient, log_lines: list[Json]) -> None:
    body = admission_review(job("XGBoostJob", name="xgb", namespace="team-a", Worker=1))
    post(client, "/validate", body)
    [line] = log_lines
    assert line | {"latency_ms": 0} == {
        "path": "/validate",
        "uid": body["request"]["uid"],
        "kind": "XGBoostJob",
        "namespace": "team-a",
        "name": "xgb",
        "operation": "CREATE",
        "dry_run": False,
        "allowed": False,
        "status": 200,
        "latency_ms": 0,
    }
    assert line["latency_ms"] > 0


def test_a_rejected_body_is_logged_with_its_status_and_reason(
    client: FlaskClient, log_lines: list[Json]
) -> None:
    post(client, "/mutate", b"{")
    [line] = log_lines
    assert line["status"] == 400
    assert line["path"] == "/mutate"
    assert line["error"].startswith("body is not valid JSON")


def test_a_bug_is_logged_with_its_traceback_in_the_same_line(
    monkeypatch: pytest.MonkeyPatch, client: FlaskClient, log_lines: list[Json]
) -> None:
    monkeypatch.setattr(admission, "admit", lambda job, old=None: 1 / 0)
    post(client, "/validate", review())
    [line] = log_lines
    assert line["error"] == "ZeroDivisionError('division by zero')"
    assert "Traceback" in line["traceback"]
