"""The hook and webhook servers as they run in a pod: gunicorn with their config modules, on loopback.

`serve("hooks", tmp_path)` yields a `Server` with the app and metrics addresses; its log tells whether a
worker died (gunicorn boots a replacement for every worker that exits).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from trainop.local.ports import free_ports

REPO = Path(__file__).resolve().parents[1]
BOOTED = "Booting worker with pid"


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log: Path
    workers: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            text: str = r.read().decode()
            return text

    def boots(self) -> int:
        return self.log.read_text(errors="replace").count(BOOTED)

    def worker_deaths(self) -> int:
        """Workers that exited and were replaced since the server started."""
        return self.boots() - self.workers

    def wait_booted(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.boots() < count:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gunicorn did not boot {count} workers:\n{self.log.read_text()}")
            time.sleep(0.05)


def _wait_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{url} did not come up:\n{log.read_text(errors='replace')}") from None
            time.sleep(0.05)


@contextlib.contextmanager
def serve(which: str, tmp_path: Path, workers: int = 2, **env: str) -> Iterator[Server]:
    """gunicorn serving `which` ("hooks" or "webhooks", plain HTTP) until the block ends."""
    prefix = {"hooks": "TRAINOP_HOOK", "webhooks": "TRAINOP_WEBHOOK"}[which]
    port, metrics_port = free_ports(2)
    log = tmp_path / f"{which}-{port}.log"
    full_env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        f"{prefix}_BIND": f"127.0.0.1:{port}",
        f"{prefix}_METRICS_BIND": f"127.0.0.1:{metrics_port}",
        f"{prefix}_WORKERS": str(workers),
        **env,
    }
    for name in (
        "TRAINOP_KUBECONFIG",
        "PROMETHEUS_MULTIPROC_DIR",
        "TRAINOP_TLS_CERT_FILE",
        "TRAINOP_TLS_KEY_FILE",
    ):
        if name not in env:
            full_env.pop(name, None)
    argv = [sys.executable, "-m", "gunicorn", "-c", f"python:{which}.gunicorn_conf", f"{which}.app:app"]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    server = Server(proc, port, metrics_port, log, workers)
    try:
        _wait_up(f"http://127.0.0.1:{port}/healthz", proc, log)
        _wait_up(f"http://127.0.0.1:{metrics_port}/metrics", proc, log)
        server.wait_booted(workers)
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def worker_pids(server: Server) -> list[int]:
    """The live worker processes of the gunicorn master (children of its pid)."""
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
    return [int(pid) for pid in children]


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the sample `name{labels}` in a Prometheus text exposition; 0 if absent."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return float(found.value)
    return 0.0
