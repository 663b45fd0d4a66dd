"""Property: whatever arrives, both routes answer JSON: 200 with an AdmissionReview, or a clean 4xx.

Never a 5xx, and never the internal-error denial either: that would mean defaulting or validation raised
on some input, which is a bug even though the server survives it.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import admission_review, container, job, replica, with_spec
from tests.fuzzing import FUZZ as HOSTILE
from tests.fuzzing import encode, hostile_bodies
from trainop.jsontypes import Json
from webhooks.app import create_app

CLIENT: FlaskClient = create_app().test_client()
ROUTES = st.sampled_from(["/mutate", "/validate"])
# Kept small so the suite stays fast; TRAINOP_FUZZ_EXAMPLES=5000 runs a deeper campaign.
FUZZ = settings(
    max_examples=int(os.environ.get("TRAINOP_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "Worker", "worker", "Master", "None", "All", "auto", "c10d", "ExitCode", "²"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

SEEDS = [
    job("TFJob", Chief=1, PS=1, Worker=2),
    with_spec(job("PyTorchJob", Master=1, Worker=2), elasticPolicy={"minReplicas": 1, "maxReplicas": 3}),
    job("XGBoostJob", Master=1, Worker=2),
    with_spec(job("MPIJob", Launcher=1, Worker=2), cleanPodPolicy="All", slotsPerWorker=2),
    with_spec(job("PaddleJob", Master=1, Worker=2), elasticPolicy={"maxReplicas": 3}),
    job("JAXJob", Worker=replica("JAXJob", 2, [container("jax", ports=[{"name": "x", "containerPort": 1}])])),
    job("MXJob", Scheduler=1, Server=1, Worker=2),
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location inside a JSON value, as key/index paths."""
    out = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            out += _paths(child, (*prefix, index))
    return out


def _replace(root: Json, path: tuple[Any, ...], value: Any) -> Json:
    out = copy.deepcopy(root)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@st.composite
def corrupted_reviews(draw: st.DrawFn) -> Json:
    """A real AdmissionReview with a few locations (anywhere, envelope included) set to random JSON."""
    seed = draw(st.sampled_from(SEEDS))
    operation = draw(st.sampled_from(["CREATE", "UPDATE"]))
    review = admission_review(seed, operation, old=copy.deepcopy(seed) if operation == "UPDATE" else None)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(review) if p]
        review = _replace(review, draw(st.sampled_from(paths)), draw(json_values))
    return review


def assert_clean_answer(status: int, data: bytes, sent: Any = None) -> None:
    assert status < 500
    body = json.loads(data)
    if status == 200:
        response = body["response"]
        assert body["apiVersion"] == "admission.k8s.io/v1"
        assert body["kind"] == "AdmissionReview"
        assert response["uid"] == sent["request"]["uid"]
        assert isinstance(response["allowed"], bool)
        assert response.get("status", {}).get("code") != 500, response["status"]
    else:
        assert 400 <= status < 500
        assert isinstance(body["error"], str)
        assert "\n" not in body["error"]


def post(path: str, data: bytes) -> tuple[int, bytes]:
    resp = CLIENT.post(path, data=data, content_type="application/json")
    assert resp.mimetype == "application/json"
    return resp.status_code, resp.data


@FUZZ
@given(path=ROUTES, review=corrupted_reviews())
def test_corrupted_admission_reviews_get_a_clean_answer(path: str, review: Json) -> None:
    status, data = post(path, json.dumps(review).encode())
    assert_clean_answer(status, data, review)


@FUZZ
@given(path=ROUTES, review=corrupted_reviews(), cut=st.floats(min_value=0, max_value=1, exclude_max=True))
def test_truncated_admission_reviews_get_400(path: str, review: Json, cut: float) -> None:
    data = json.dumps(review).encode()
    status, answer = post(path, data[: int(len(data) * cut)])
    assert status == 400
    assert_clean_answer(status, answer)


@FUZZ
@given(path=ROUTES, data=json_values.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=64))
def test_arbitrary_json_or_bytes_get_a_clean_answer(path: str, data: bytes) -> None:
    status, answer = post(path, data)
    assert_clean_answer(status, answer)


@FUZZ
@given(path=ROUTES, seed=st.sampled_from(SEEDS), spec=st.dictionaries(st.text(max_size=20), json_values))
def test_random_specs_of_every_kind_get_a_clean_answer(path: str, seed: Json, spec: Json) -> None:
    obj = copy.deepcopy(seed)
    obj["spec"].update(spec)
    review = admission_review(obj)
    status, data = post(path, json.dumps(review).encode())
    assert_clean_answer(status, data, review)


# ---- hostile bodies at volume (tests/fuzzing.py; `make fuzz` runs 10,000 of each) -------------------
HOSTILE_SEEDS = [
    admission_review(seed, operation, old=copy.deepcopy(seed) if operation == "UPDATE" else None)
    for seed in SEEDS
    for operation in ("CREATE", "UPDATE")
]


def assert_answered(status: int, data: bytes, sent: Any) -> None:
    """200 with an AdmissionReview (never the internal-error denial) or a one-line 4xx, for any body."""
    assert status < 500
    body = json.loads(data)
    if status != 200:
        assert isinstance(body["error"], str) and "\n" not in body["error"]
        return
    response = body["response"]
    assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    assert response["uid"] == sent["request"]["uid"]
    assert isinstance(response["allowed"], bool)
    assert response.get("status", {}).get("code") != 500, response["status"]


@HOSTILE
@given(review=hostile_bodies(HOSTILE_SEEDS), ascii_only=st.booleans())
def test_hostile_admission_reviews_to_mutate_get_a_clean_answer(review: Any, ascii_only: bool) -> None:
    assert_answered(*post("/mutate", encode(review, ascii_only)), review)


@HOSTILE
@given(review=hostile_bodies(HOSTILE_SEEDS), ascii_only=st.booleans())
def test_hostile_admission_reviews_to_validate_get_a_clean_answer(review: Any, ascii_only: bool) -> None:
    assert_answered(*post("/validate", encode(review, ascii_only)), review)
