"""Hostile bodies through the real servers (gunicorn, their config modules): no 5xx, no dead worker.

The in-process suites (tests/hooks/test_fuzz_hostile.py, tests/webhooks/test_fuzz.py) find wrong answers;
this one finds what only a process shows: a worker killed by a crash, a memory blow-up or a timeout,
which gunicorn replaces silently. A fifth of TRAINOP_FUZZ_EXAMPLES goes to each route (HTTP is slower).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzzing import EXAMPLES, FUZZ, encode, hostile_bodies
from tests.hooks.test_fuzz_hostile import SEEDS as HOOK_SEEDS
from tests.servers import Server, serve, worker_pids
from tests.webhooks.test_fuzz import HOSTILE_SEEDS as REVIEW_SEEDS

THROUGH_GUNICORN = settings(FUZZ, max_examples=max(50, EXAMPLES // 5))


class Client:
    """One kept-alive connection, reopened only when the server closed it cleanly between requests."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)

    def post(self, path: str, data: bytes) -> tuple[int, bytes]:
        self.conn.request("POST", path, data, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        body = response.read()
        if response.will_close:
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        return response.status, body


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with serve("hooks", tmp_path_factory.mktemp("hooks")) as server:
        client = Client(server)
        yield client
        assert server.worker_deaths() == 0, server.log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def webhooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    with serve("webhooks", tmp_path_factory.mktemp("webhooks")) as server:
        client = Client(server)
        yield client
        assert server.worker_deaths() == 0, server.log.read_text(errors="replace")[-3000:]


def answered(status: int, data: bytes) -> Any:
    assert status < 500, data[:300]
    return json.loads(data)


@THROUGH_GUNICORN
@given(body=hostile_bodies(HOOK_SEEDS), path=st.sampled_from(["/sync", "/finalize"]))
def test_hostile_hook_calls_never_get_a_5xx_or_kill_a_worker(hooks: Client, body: Any, path: str) -> None:
    answered(*hooks.post(path, encode(body)))
    assert hooks.server.worker_deaths() == 0


@THROUGH_GUNICORN
@given(review=hostile_bodies(REVIEW_SEEDS), path=st.sampled_from(["/mutate", "/validate"]))
def test_hostile_admission_reviews_never_get_a_5xx_or_kill_a_worker(
    webhooks: Client, review: Any, path: str
) -> None:
    answered(*webhooks.post(path, encode(review)))
    assert webhooks.server.worker_deaths() == 0


def test_a_worker_death_is_seen(tmp_path: Path) -> None:
    """The check above can fail: a killed worker shows up as a death."""
    with serve("hooks", tmp_path) as server:
        os.kill(worker_pids(server)[0], signal.SIGKILL)
        server.wait_booted(server.workers + 1)
        assert server.worker_deaths() == 1
