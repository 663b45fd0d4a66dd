"""Prometheus metrics of the gunicorn servers, summed over every worker process.

gunicorn runs several worker processes; each keeps its own counters. prometheus_client's multiprocess
mode has every worker write its values to memory-mapped files in PROMETHEUS_MULTIPROC_DIR, and the
master serves their sum on a port of its own (never the app port: a scrape must not queue behind
sync calls, and the webhook port speaks TLS to the apiserver only).

The gunicorn config modules wire the four server hooks below. Order matters: the directory must be in
the environment before anything imports prometheus_client (the value class is chosen at import), so
this module imports it only inside the functions that gunicorn calls once the variable is set.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Set while this process created the directory itself, so only that one is removed at exit.
_CREATED: list[Path] = []
log = logging.getLogger("trainop.metrics")


def parse_bind(bind: str) -> tuple[str, int] | None:
    """`host:port` (or `:port`) to (host, port); "" or "off" disables the metrics server."""
    if bind.strip().lower() in ("", "off", "none", "false"):
        return None
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"metrics address must be HOST:PORT (or '' to disable), got {bind!r}")
    return (host.strip("[]") or "0.0.0.0", int(port))


def prepare_directory(server_name: str) -> Path:
    """Point PROMETHEUS_MULTIPROC_DIR at an empty directory before any worker starts.

    A given directory is emptied of old values: an emptyDir outlives a container restart, and a
    restarted server must not report its predecessor's counts twice. Without one, a fresh directory
    under the temp dir (/tmp, the writable tmpfs of a read-only pod) is made and removed at exit.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for old in path.glob("*.db"):
            old.unlink()
    else:
        path = Path(tempfile.mkdtemp(prefix=f"trainop-{server_name}-metrics-"))
        _CREATED.append(path)
        os.environ[MULTIPROC_ENV] = str(path)
    return path


def serve(bind: str) -> Any:
    """Serve the summed metrics on `bind` from a thread of this (master) process; None when disabled."""
    address = parse_bind(bind)
    if address is None:
        return None
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    host, port = address
    server, _thread = start_http_server(port, host, registry=registry)
    log.info("serving Prometheus metrics on http://%s:%d/metrics", host, port)
    return server


def worker_exited(pid: int) -> None:
    """Drop a dead worker's live gauges; its counters and histograms stay in the sum, as they should."""
    if MULTIPROC_ENV not in os.environ:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid)


def cleanup() -> None:
    for path in _CREATED:
        shutil.rmtree(path, ignore_errors=True)
    _CREATED.clear()


class GunicornHooks:
    """The gunicorn server hooks of one server; assign its methods in a gunicorn config module."""

    def __init__(self, server_name: str, bind: str) -> None:
        self.server_name = server_name
        self.bind = bind
        parse_bind(bind)  # a bad address fails when gunicorn reads its config, not at the first scrape

    def on_starting(self, _server: Any) -> None:
        prepare_directory(self.server_name)

    def when_ready(self, server: Any) -> None:
        try:
            serve(self.bind)
        except OSError as exc:
            # The servers' real work goes on without metrics; the error says which port was taken.
            server.log.error("metrics server on %s did not start: %s", self.bind, exc)

    def child_exit(self, _server: Any, worker: Any) -> None:
        worker_exited(worker.pid)

    def on_exit(self, _server: Any) -> None:
        cleanup()
