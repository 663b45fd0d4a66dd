"""Bodies the webhook refuses before parsing them, its parse budget, and defaulting that copies only what
it changes."""

from __future__ import annotations

import json

from flask.testing import FlaskClient

from tests.builders import admission_review, job
from tests.webhooks.helpers import patch_of, post, review_response
from trainop.admission.defaults import apply_defaults
from trainop.jsoncost import Claim
from trainop.jsontypes import Json
from webhooks.admission import json_patch
from webhooks.app import BUDGET_CONFIG, DEFAULT_MAX_BODY_BYTES, create_app


def padded_review(unit: bytes, size: int) -> bytes:
    """A valid AdmissionReview whose object carries a top-level field `pad` of `size` bytes of `unit`."""
    review = json.dumps(admission_review(job("TFJob", name="pad", Worker=1)), separators=(",", ":")).encode()
    pad = b'"pad":[' + unit * ((size - len(review)) // len(unit)) + b"0],"
    assert b'"object":{' in review
    return review.replace(b'"object":{', b'"object":{' + pad, 1)


def test_an_8_mib_review_of_empty_arrays_is_a_413_naming_what_it_would_cost(client: FlaskClient) -> None:
    body = padded_review(b"[],", DEFAULT_MAX_BODY_BYTES - 1024)
    assert len(body) <= DEFAULT_MAX_BODY_BYTES
    status, answer = post(client, "/mutate", body)
    assert status == 413
    assert "JSON arrays and objects" in answer["error"] and "more than 8 times its size" in answer["error"]


def test_a_review_padded_with_long_strings_is_still_answered(client: FlaskClient) -> None:
    body = padded_review(b'"' + b"x" * 1000 + b'",', 4 * 1024 * 1024)
    status, answer = post(client, "/validate", body)
    assert status == 200 and answer["response"]["allowed"] is True


def test_a_review_that_finds_the_parse_budget_taken_is_a_429_with_retry_after() -> None:
    app = create_app(inflight_bytes=1024 * 1024)
    held = Claim(app.config[BUDGET_CONFIG])
    assert held.grow(1024 * 1024, wait=0)
    try:
        response = app.test_client().post(
            "/validate",
            data=json.dumps(admission_review(job("TFJob", Worker=1))),
            content_type="application/json",
        )
    finally:
        held.release()
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "1"
    assert "TRAINOP_WEBHOOK_MAX_INFLIGHT_BYTES" in response.get_json()["error"]


def test_the_budget_is_given_back_after_every_answer() -> None:
    app = create_app(inflight_bytes=1024 * 1024)
    client = app.test_client()
    for body in (b"not json", json.dumps(admission_review(job("TFJob", Worker=1))).encode()):
        client.post("/mutate", data=body, content_type="application/json")
    assert app.config[BUDGET_CONFIG].held == 0


def test_defaulting_shares_every_field_it_does_not_change() -> None:
    obj = job("TFJob", name="j", Worker=2)
    obj["pad"] = [[] for _ in range(10)]
    pod = obj["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    pod["volumes"] = [{"name": "data", "emptyDir": {}}]
    out = apply_defaults(obj)
    assert out["pad"] is obj["pad"] and out["metadata"] is obj["metadata"]
    assert out["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"] is pod["volumes"]


def test_defaulting_leaves_its_input_unchanged() -> None:
    obj = job("PyTorchJob", name="j", Master=1, Worker=2)
    obj["spec"]["elasticPolicy"] = {"maxReplicas": 4}
    before = json.dumps(obj, sort_keys=True)
    apply_defaults(obj)
    assert json.dumps(obj, sort_keys=True) == before


def test_the_patch_of_a_padded_job_is_the_patch_of_the_plain_one(client: FlaskClient) -> None:
    plain = job("TFJob", name="j", Worker=2)
    padded = {**plain, "pad": [[] for _ in range(1000)]}
    ops = patch_of(review_response(client, "/mutate", admission_review(padded)))
    assert ops == patch_of(review_response(client, "/mutate", admission_review(plain)))
    assert all(op["path"].startswith("/spec/") for op in ops)


def test_the_patch_turns_the_object_into_its_defaulted_form_when_a_top_level_field_changes() -> None:
    before: Json = {"a": 1, "spec": {"x": [1, 2]}, "gone": True}
    after: Json = {"a": 1, "spec": {"x": [1, 2, 3]}, "new": {"y": 1}}
    import jsonpatch

    assert jsonpatch.apply_patch(before, json_patch(before, after)) == after
