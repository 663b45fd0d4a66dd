"""Metrics under several gunicorn workers: the master's port serves the sum of every worker's counts.

Job transitions count once the apiserver confirms the job, so the hooks talk to a fake apiserver that
holds every job they ask about (tests.hooks.apiserver).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from tests.builders import job
from tests.hooks.apiserver import FakeApiserver, fake_apiserver
from tests.servers import Server, sample, serve, worker_pids
from trainop.jsontypes import Json


def xgboost_job(name: str) -> Json:
    out = job("XGBoostJob", name=name, namespace="gm", Master=1)
    out["metadata"]["uid"] = f"uid-{name}"
    return out


@contextlib.contextmanager
def hooks(tmp_path: Path, workers: int = 2, **env: str) -> Iterator[tuple[Server, FakeApiserver]]:
    with (
        fake_apiserver(tmp_path, lambda namespace, name: xgboost_job(name)) as fake,
        serve("hooks", tmp_path, workers, TRAINOP_KUBECONFIG=str(fake.kubeconfig), **env) as server,
    ):
        yield server, fake


def sync_new_jobs(server: Server, count: int, prefix: str) -> None:
    """Each call on a fresh connection, so gunicorn's workers share them."""
    for i in range(count):
        body = {"parent": xgboost_job(f"{prefix}-{i}"), "children": {}}
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/sync", json.dumps(body), {"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
        conn.close()


def created(server: Server) -> float:
    return sample(
        server.metrics(), "training_operator_jobs_created_total", framework="xgboost", job_namespace="gm"
    )


def test_counts_from_every_worker_are_summed_on_the_metrics_port(tmp_path: Path) -> None:
    with hooks(tmp_path, workers=3) as (server, fake):
        sync_new_jobs(server, 30, "sum")
        fake.settle(job_reads=30)
        assert created(server) == 30
        text = server.metrics()
        assert sample(text, "trainop_hook_duration_seconds_count", hook="sync", kind="XGBoostJob") == 30


def test_killed_workers_counts_stay_in_the_sum(tmp_path: Path) -> None:
    with hooks(tmp_path, workers=2) as (server, fake):
        sync_new_jobs(server, 20, "kill")
        fake.settle(job_reads=20)
        for pid in worker_pids(server):
            os.kill(pid, signal.SIGKILL)
        server.wait_booted(4)
        sync_new_jobs(server, 5, "after")
        fake.settle(job_reads=25)
        assert created(server) == 25


def test_a_restarted_server_does_not_report_its_predecessors_counts(tmp_path: Path) -> None:
    directory = tmp_path / "multiproc"
    with hooks(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(directory)) as (server, fake):
        sync_new_jobs(server, 3, "first")
        fake.settle(job_reads=3)
        assert created(server) == 3
    with serve("hooks", tmp_path, PROMETHEUS_MULTIPROC_DIR=str(directory)) as server:
        assert created(server) == 0


def test_the_temporary_metrics_directory_is_removed_at_exit(tmp_path: Path) -> None:
    env = {"TMPDIR": str(tmp_path)}
    with serve("hooks", tmp_path, **env):
        assert len(list(tmp_path.glob("trainop-hooks-metrics-*"))) == 1
    deadline = time.monotonic() + 10
    while list(tmp_path.glob("trainop-hooks-metrics-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob("trainop-hooks-metrics-*")) == []


def test_the_webhook_server_serves_its_metrics_on_its_own_port(tmp_path: Path) -> None:
    with serve("webhooks", tmp_path) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/validate", b"{}", {"Content-Type": "application/json"})
        assert conn.getresponse().status == 400
        assert sample(server.metrics(), "trainop_webhook_requests_total", webhook="validate", code="400") == 1
