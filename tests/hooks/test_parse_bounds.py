"""Bodies the hook refuses before parsing them, its parse budget, and its ceiling on an answer's size."""

from __future__ import annotations

import json
import logging

import pytest

from hooks.app import BUDGET_CONFIG, DEFAULT_MAX_BODY, create_app
from tests.builders import T0, job
from trainop.jsoncost import Claim

logging.getLogger("trainop.hooks").setLevel(logging.CRITICAL)


def sync_body(parent: dict[str, object]) -> bytes:
    return json.dumps({"parent": parent, "children": {}}).encode()


def test_a_16_mib_sync_of_empty_arrays_is_a_413() -> None:
    body = b'{"parent":' + b"[" + b"[]," * (16 * 1024 * 1024 // 3) + b"[]]}"
    assert len(body) < DEFAULT_MAX_BODY
    response = (
        create_app(clock=lambda: T0).test_client().post("/sync", data=body, content_type="application/json")
    )
    assert response.status_code == 413
    assert "a body may take before its job says what its children may" in response.get_json()["error"]


def test_a_sync_that_finds_the_parse_budget_taken_is_a_429_with_retry_after() -> None:
    app = create_app(clock=lambda: T0)
    held = Claim(app.config[BUDGET_CONFIG])
    assert held.grow(app.config[BUDGET_CONFIG].limit, wait=0)
    try:
        response = app.test_client().post("/sync", data=sync_body(job("TFJob", name="j", Worker=1)))
    finally:
        held.release()
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "1"
    assert "TRAINOP_HOOK_MAX_INFLIGHT_BYTES" in response.get_json()["error"]


def test_a_sync_costing_more_than_the_whole_budget_is_a_413(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOP_HOOK_MAX_INFLIGHT_BYTES", "1000")
    app = create_app(clock=lambda: T0)
    response = app.test_client().post("/sync", data=sync_body(job("TFJob", name="j", Worker=1)))
    assert response.status_code == 413
    assert "more than the 1000 bytes this server parses at once" in response.get_json()["error"]
    assert app.config[BUDGET_CONFIG].held == 0


def test_an_answer_over_the_configured_size_is_a_503_that_metacontroller_retries(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TRAINOP_HOOK_MAX_RESPONSE_BYTES", "10000")
    client = create_app(clock=lambda: T0).test_client()
    with caplog.at_level(logging.WARNING, logger="trainop.hooks"):
        response = client.post(
            "/sync", data=sync_body(job("TFJob", name="j", Worker=20)), content_type="application/json"
        )
    assert response.status_code == 503
    assert "TRAINOP_HOOK_MAX_RESPONSE_BYTES=10000" in response.get_json()["error"]
    assert any("response_bytes" in r.getMessage() for r in caplog.records)


class Submissions:
    """A recorder that keeps what it is handed."""

    def __init__(self) -> None:
        self.batches: list[object] = []

    def submit(self, parent: object, events: object, transitions: object) -> None:
        self.batches.append((events, transitions))


def test_an_answer_refused_for_its_size_records_no_event(monkeypatch: pytest.MonkeyPatch) -> None:
    body = sync_body(job("TFJob", name="j", Worker=20))
    recorder = Submissions()
    app = create_app(clock=lambda: T0, recorder=recorder)  # type: ignore[arg-type]
    assert app.test_client().post("/sync", data=body).status_code == 200
    assert recorder.batches  # the first sync of a job records its pods' creation
    monkeypatch.setenv("TRAINOP_HOOK_MAX_RESPONSE_BYTES", "10000")
    recorder = Submissions()
    app = create_app(clock=lambda: T0, recorder=recorder)  # type: ignore[arg-type]
    assert app.test_client().post("/sync", data=body).status_code == 503
    assert recorder.batches == []


def test_an_answer_under_the_configured_size_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOP_HOOK_MAX_RESPONSE_BYTES", "10000000")
    client = create_app(clock=lambda: T0).test_client()
    response = client.post(
        "/sync", data=sync_body(job("TFJob", name="j", Worker=20)), content_type="application/json"
    )
    assert response.status_code == 200 and len(response.get_json()["children"]) == 40
