"""Property: whatever hostile body reaches `/sync` or `/finalize`, the answer is a 200 Metacontroller can
apply or a one-line 400, never a 5xx.

Bodies come from tests/fuzzing.py: real hook requests (realistic observed pods with full status and
managedFields, every kind, running and finished) with nodes at any depth replaced by wrong types, huge
strings and lists, deep nesting, NaN, huge numbers and hostile unicode. tests/test_fuzz_gunicorn.py
sends the same bodies through gunicorn to catch worker deaths too.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hooks.app import create_app
from tests.builders import job, with_run_policy, with_spec
from tests.controller.fakes import json_hygiene_problems
from tests.fuzzing import FUZZ, Raw, encode, hostile_bodies
from tests.hooks.test_http import Clock, FakeDeleter
from tests.realistic import observed
from trainop.controller.sync import sync
from trainop.job.settings import Settings
from trainop.jsontypes import Json

NOW = datetime(2026, 1, 1, tzinfo=UTC)
JOBS = [
    job("TFJob", name="tf", namespace="ns", Chief=1, PS=1, Worker=2),
    with_spec(
        job("PyTorchJob", name="pt", namespace="ns", Master=1, Worker=2),
        elasticPolicy={"minReplicas": 1, "maxReplicas": 3},
    ),
    job("XGBoostJob", name="xgb", namespace="ns", Master=1, Worker=1),
    with_spec(job("MPIJob", name="mpi", namespace="ns", Launcher=1, Worker=2), slotsPerWorker=2),
    with_run_policy(
        job("PaddleJob", name="pd", namespace="ns", Master=1, Worker=1), ttlSecondsAfterFinished=0
    ),
    job("JAXJob", name="jax", namespace="ns", Worker=2),
    with_run_policy(
        job("MXJob", name="mx", namespace="ns", Scheduler=1, Server=1, Worker=1),
        schedulingPolicy={"minAvailable": 2, "queue": "q", "minResources": {"cpu": "1"}},
        backoffLimit=2,
        activeDeadlineSeconds=600,
    ),
]


def requests_of(parent: Json) -> list[Json]:
    """The first sync, a running resync and a finished resync, as Metacontroller sends them."""
    first = sync(parent, {}, Settings(), NOW)
    new = {"parent": parent, "children": {}}
    running_parent = {**parent, "status": first.status}
    running = {"parent": running_parent, "children": observed(first.children, parent)}
    done_children = observed(first.children, parent, phase="Succeeded")
    done = sync(running_parent, done_children, Settings(), NOW)
    finished = {"parent": {**parent, "status": done.status}, "children": done_children, "finalizing": False}
    return [new, running, finished]


SEEDS = [request for parent in JOBS for request in requests_of(parent)]
CLIENTS = [
    create_app(Settings(), FakeDeleter(), Clock(NOW)).test_client(),
    create_app(Settings(gang_scheduler="volcano"), FakeDeleter(), Clock(NOW)).test_client(),
]


def check(status: int, data: bytes) -> None:
    assert status in (200, 400, 413), data[:300]
    payload = json.loads(data)
    if status == 200:
        assert set(payload) <= {"status", "children", "resyncAfterSeconds", "finalized"}
        assert isinstance(payload["status"], dict) and isinstance(payload["children"], list)
        # What the hook computes is clean JSON. Children of a finished job are the observed ones
        # returned as they came (the apiserver stores no nulls), so a null planted there may echo back.
        problems = json_hygiene_problems({k: v for k, v in payload.items() if k != "children"})
        assert problems == [], problems[:5]
        assert all(
            isinstance(c, dict) and isinstance(c["metadata"]["name"], str) for c in payload["children"]
        )
    else:
        assert set(payload) == {"error"} and "\n" not in payload["error"]


def planted(seed: Json, keys: Json) -> Json:
    """`seed` with `keys` added to its first condition, each replica status and each pod restart, and a
    replica status of a type the kind does not have."""
    body: Json = orjson.loads(orjson.dumps(seed))
    status = body["parent"]["status"]
    status["conditions"][0].update(keys)
    for entry in status["replicaStatuses"].values():
        entry.update(keys)
    status["replicaStatuses"]["Bogus"] = {"active": 1}
    status["podRestarts"] = {"tf-worker-0": {"count": 1, "uid": "uid-of-a-gone-pod", **keys}}
    return body


# Found by the fuzz below, on a fresh machine: a key "" with null planted in the finished job's first
# condition came back from /finalize as it was (and /sync kept unknown keys such as "bogus": {}).
PLANTED_KEYS: Json = {"": None, "bogus": {}, "active ": 1}
PLANTED_IN_A_FINISHED_JOB = planted(SEEDS[2], PLANTED_KEYS)
PLANTED_IN_A_RUNNING_JOB = planted(SEEDS[1], PLANTED_KEYS)
OWNED_FIELDS = {
    "conditions": {"type", "status", "reason", "message", "lastUpdateTime", "lastTransitionTime"},
    "replicaStatuses": {"active", "succeeded", "failed", "selector"},
    "podRestarts": {"count", "uid"},
}


@FUZZ
@example(body=PLANTED_IN_A_FINISHED_JOB, client=CLIENTS[0], ascii_only=False)
@example(body=PLANTED_IN_A_RUNNING_JOB, client=CLIENTS[0], ascii_only=False)
@given(body=hostile_bodies(SEEDS), client=st.sampled_from(CLIENTS), ascii_only=st.booleans())
def test_hostile_sync_bodies_never_get_a_5xx(body: Any, client: Any, ascii_only: bool) -> None:
    response = client.post("/sync", data=encode(body, ascii_only), content_type="application/json")
    check(response.status_code, response.data)


@FUZZ
@example(body=PLANTED_IN_A_FINISHED_JOB, ascii_only=False)
@given(body=hostile_bodies(SEEDS), ascii_only=st.booleans())
def test_hostile_finalize_bodies_never_get_a_5xx(body: Any, ascii_only: bool) -> None:
    response = CLIENTS[0].post("/finalize", data=encode(body, ascii_only), content_type="application/json")
    check(response.status_code, response.data)


@pytest.mark.parametrize("path", ["/sync", "/finalize"])
@pytest.mark.parametrize(
    "body", [PLANTED_IN_A_FINISHED_JOB, PLANTED_IN_A_RUNNING_JOB], ids=["finished", "running"]
)
def test_planted_status_keys_are_not_echoed(path: str, body: Json) -> None:
    """The hook answers only the status fields it owns: what another writer planted is dropped."""
    response = CLIENTS[0].post(path, data=encode(body), content_type="application/json")
    assert response.status_code == 200, response.data
    status = response.get_json()["status"]
    assert json_hygiene_problems(status) == []
    entries = {
        "conditions": status["conditions"],
        "replicaStatuses": list(status["replicaStatuses"].values()),
        "podRestarts": list(status.get("podRestarts", {}).values()),
    }
    for field, values in entries.items():
        assert values, field
        for value in values:
            assert set(value) <= OWNED_FIELDS[field], (field, value)
    assert set(status["replicaStatuses"]) == {"Chief", "PS", "Worker"}
    # Only the planted keys go: what the hook owns is kept.
    sent = body["parent"]["status"]
    assert status["conditions"][0] == {
        k: v for k, v in sent["conditions"][0].items() if k not in PLANTED_KEYS
    }
    if path == "/finalize":
        assert status["podRestarts"] == {"tf-worker-0": {"count": 1, "uid": "uid-of-a-gone-pod"}}


def test_the_fuzz_settings_follow_the_loaded_profile() -> None:
    """Built before tests/conftest.py loads its profile, a suite's settings would draw fresh random examples
    in the gate (or keep no database when exploring)."""
    from tests.test_fuzz_gunicorn import THROUGH_GUNICORN
    from tests.webhooks.test_fuzz import FUZZ as WEBHOOK_FUZZ

    loaded = settings()
    assert settings.get_current_profile_name() in ("repeatable", "explore")
    for suite in (FUZZ, THROUGH_GUNICORN, WEBHOOK_FUZZ):
        assert (suite.derandomize, suite.database is None) == (loaded.derandomize, loaded.database is None)


def test_a_child_whose_kind_is_not_a_string_is_a_400() -> None:
    """Found by the suite above: a list as a child's kind reached a dict key in the finished-job path."""
    body = SEEDS[2]
    child = next(iter(body["children"]["Pod.v1"].values()))
    hostile = {**body, "children": {"Pod.v1": {child["metadata"]["name"]: {**child, "kind": ["Pod"]}}}}
    response = CLIENTS[0].post("/sync", data=encode(hostile), content_type="application/json")
    assert response.status_code == 400
    assert response.get_json() == {
        "error": f"children['Pod.v1'][{child['metadata']['name']!r}].kind must be a string"
    }


def test_a_child_without_a_name_is_a_400() -> None:
    """Found by the volume fuzz through gunicorn: a finished job returned an unnamed observed pod as
    desired, and deriving its events failed on the missing name (a 500)."""
    body = SEEDS[2]
    key, child = next(iter(body["children"]["Pod.v1"].items()))
    unnamed = {**child, "metadata": {**child["metadata"], "name": ""}}
    hostile = {**body, "children": {"Pod.v1": {key: unnamed}}}
    response = CLIENTS[0].post("/sync", data=encode(hostile), content_type="application/json")
    assert response.status_code == 400
    assert response.get_json() == {
        "error": f"children['Pod.v1'][{key!r}].metadata.name must be a non-empty string"
    }


def test_a_parent_nested_deeper_than_any_job_is_a_400() -> None:
    """Found by the suite above: 600 nested lists under the job overflowed Python's recursion limit."""
    body = {**SEEDS[0], "parent": {**SEEDS[0]["parent"], "extra": Raw("[" * 600 + "]" * 600)}}
    response = CLIENTS[0].post("/sync", data=encode(body), content_type="application/json")
    assert (response.status_code, response.get_json()) == (
        400,
        {"error": "`parent` is nested deeper than 100 levels"},
    )


@pytest.mark.parametrize("depth", [300, 900])
def test_a_child_nested_deeper_than_json_encoders_follow_is_no_5xx(depth: int) -> None:
    body = orjson.loads(orjson.dumps(SEEDS[2]))
    child = next(iter(body["children"]["Pod.v1"].values()))
    child["spec"]["extra"] = Raw('{"a":' * depth + "0" + "}" * depth)
    response = CLIENTS[0].post("/sync", data=encode(body), content_type="application/json")
    assert response.status_code in (200, 400)
