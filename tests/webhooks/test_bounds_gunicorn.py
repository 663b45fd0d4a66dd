"""The hostile bodies of the largest size each server admits, through gunicorn with the shipped
gunicorn_conf files: a 4xx before parsing, no worker grown past its pod's share of memory or killed, and
the next real request answered."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hooks.app import DEFAULT_MAX_BODY
from tests.builders import admission_review, job
from tests.servers import Server, serve, worker_pids
from webhooks.app import DEFAULT_MAX_BODY_BYTES

MIB = 1024 * 1024
# A worker's share of its pod's memory limit: the webhook pod's 512Mi and the hook pod's 1536Mi each hold
# two workers (the chart's defaults). Idle workers take ~50 MiB.
WEBHOOK_WORKER_SHARE = 256 * MIB
HOOK_WORKER_SHARE = 768 * MIB


def post(server: Server, path: str, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def peak_rss(server: Server) -> int:
    """The largest peak resident size (VmHWM) of the server's live workers."""
    peaks = []
    for pid in worker_pids(server):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]) * 1024)
    return max(peaks)


def pad(unit: bytes, size: int) -> bytes:
    return b"[" + unit * (size // len(unit) - 1) + b"[]]"


@pytest.fixture(scope="module")
def webhooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve("webhooks", tmp_path_factory.mktemp("webhooks")) as server:
        yield server


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve("hooks", tmp_path_factory.mktemp("hooks")) as server:
        yield server


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_a_review_padded_with_empty_arrays_to_the_body_limit_is_a_413_and_the_server_stays_up(
    webhooks: Server, path: str
) -> None:
    review = json.dumps(admission_review(job("TFJob", name="pad", Worker=1)), separators=(",", ":")).encode()
    hostile = review.replace(
        b'"object":{', b'"object":{"pad":' + pad(b"[],", DEFAULT_MAX_BODY_BYTES - len(review) - 16) + b",", 1
    )
    assert len(hostile) <= DEFAULT_MAX_BODY_BYTES
    status, body = post(webhooks, path, hostile)
    assert status == 413, body[:300]
    status, body = post(webhooks, path, review)
    assert status == 200 and json.loads(body)["response"]["allowed"] is True
    assert webhooks.worker_deaths() == 0
    assert peak_rss(webhooks) < WEBHOOK_WORKER_SHARE


def test_a_sync_of_empty_arrays_to_the_body_limit_is_a_413_and_the_server_stays_up(hooks: Server) -> None:
    hostile = b'{"parent":' + pad(b"[],", DEFAULT_MAX_BODY - MIB) + b',"children":{}}'
    assert len(hostile) < DEFAULT_MAX_BODY
    status, body = post(hooks, "/sync", hostile)
    assert status == 413, body[:300]
    real = json.dumps({"parent": job("TFJob", name="j", Worker=2), "children": {}}).encode()
    status, body = post(hooks, "/sync", real)
    assert status == 200 and len(json.loads(body)["children"]) == 4
    assert hooks.worker_deaths() == 0
    assert peak_rss(hooks) < HOOK_WORKER_SHARE
