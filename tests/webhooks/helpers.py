"""Calling the webhooks the way the apiserver does, and reading their answers."""

from __future__ import annotations

import base64
import json

import jsonpatch
from flask.testing import FlaskClient

from tests.builders import admission_review
from trainop.jsontypes import Json


def post(client: FlaskClient, path: str, body: Json | bytes | str) -> tuple[int, Json]:
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    resp = client.post(path, data=data, content_type="application/json")
    assert resp.mimetype == "application/json", resp.data[:200]
    return resp.status_code, json.loads(resp.data)


def review_response(client: FlaskClient, path: str, review: Json) -> Json:
    """The `response` of an AdmissionReview that must have been answered with HTTP 200."""
    status, body = post(client, path, review)
    assert status == 200, body
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == review["request"]["uid"]
    response: Json = body["response"]
    return response


def patch_of(response: Json) -> list[Json]:
    if "patch" not in response:
        assert "patchType" not in response
        return []
    assert response["patchType"] == "JSONPatch"
    ops: list[Json] = json.loads(base64.b64decode(response["patch"]))
    return ops


def mutated(client: FlaskClient, obj: Json, operation: str = "CREATE", old: Json | None = None) -> Json:
    """`obj` after the defaulting webhook's patch, as the apiserver would store it."""
    response = review_response(client, "/mutate", admission_review(obj, operation, old))
    assert response["allowed"] is True
    result: Json = jsonpatch.apply_patch(obj, patch_of(response))
    return result


def validated(client: FlaskClient, obj: Json, operation: str = "CREATE", old: Json | None = None) -> Json:
    return review_response(client, "/validate", admission_review(obj, operation, old))


def denial(client: FlaskClient, obj: Json, operation: str = "CREATE", old: Json | None = None) -> str:
    """The denial message of the validating webhook; fails if the object was allowed."""
    response = validated(client, obj, operation, old)
    assert response["allowed"] is False, response
    status = response["status"]
    assert status["code"] == 422
    assert status["reason"] == "Invalid"
    message: str = status["message"]
    return message
