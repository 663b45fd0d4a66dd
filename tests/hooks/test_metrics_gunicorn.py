"""Metrics under several gunicorn workers: the master's port serves the sum of every worker's counts."""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from pathlib import Path

from tests.builders import job
from tests.servers import Server, sample, serve, worker_pids


def sync_new_jobs(server: Server, count: int, prefix: str) -> None:
    """Each call on a fresh connection, so gunicorn's workers share them."""
    for i in range(count):
        body = {"parent": job("XGBoostJob", name=f"{prefix}-{i}", namespace="gm", Master=1), "children": {}}
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/sync", json.dumps(body), {"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
        conn.close()


def created(server: Server) -> float:
    return sample(
        server.metrics(), "training_operator_jobs_created_total", framework="xgboost", job_namespace="gm"
    )


def test_counts_from_every_worker_are_summed_on_the_metrics_port(tmp_path: Path) -> None:
    with serve("hooks", tmp_path, workers=3) as server:
        sync_new_jobs(server, 30, "sum")
        assert created(server) == 30
        text = server.metrics()
        assert sample(text, "trainop_hook_duration_seconds_count", hook="sync", kind="XGBoostJob") == 30


def test_killed_workers_counts_stay_in_the_sum(tmp_path: Path) -> None:
    with serve("hooks", tmp_path, workers=2) as server:
        sync_new_jobs(server, 20, "kill")
        for pid in worker_pids(server):
            os.kill(pid, signal.SIGKILL)
        server.wait_booted(4)
        sync_new_jobs(server, 5, "after")
        assert created(server) == 25


def test_a_restarted_server_does_not_report_its_predecessors_counts(tmp_path: Path) -> None:
    directory = tmp_path / "multiproc"
    with serve("hooks", tmp_path, PROMETHEUS_MULTIPROC_DIR=str(directory)) as server:
        sync_new_jobs(server, 3, "first")
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
