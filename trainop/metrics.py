"""Prometheus metrics of the gunicorn servers, summed over every worker process.

gunicorn runs several worker processes; each keeps its own counters. prometheus_client's multiprocess
mode has every worker write its values to memory-mapped files in PROMETHEUS_MULTIPROC_DIR, and the
master serves their sum on a port of its own (never the app port: a scrape must not queue behind
sync calls, and the webhook port speaks TLS to the apiserver only).

The master serves them itself, from one thread (`MetricsServer`): a metrics port is open to more clients
than the app ports, and prometheus_client's own server starts a thread per connection and waits for its
request without a deadline, so 1,000 connections that send one byte held 1,000 threads of the master until
the client let go. Here a connection costs a file descriptor and a buffer until its deadline, and there are
at most `max_connections` (docs/limits-connections.md).

The gunicorn config modules wire the four server hooks below. Order matters: the directory must be in
the environment before anything imports prometheus_client (the value class is chosen at import), so
this module imports it only inside the functions that gunicorn calls once the variable is set.
"""

from __future__ import annotations

import contextlib
import email.utils
import io
import logging
import os
import selectors
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from trainop.envvalues import PositiveInt, Seconds, SettingError, Text

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


@dataclass(frozen=True)
class MetricsLimits:
    """Deadline and connection cap of a metrics port (docs/limits-connections.md)."""

    # From the accept to the last byte of the answer: a scrape sends a few hundred bytes and reads the text.
    timeout_seconds: float = 10.0
    max_connections: int = 64
    max_request_bytes: int = 16 * 1024

    @classmethod
    def from_env(cls, prefix: str, environ: Mapping[str, str]) -> MetricsLimits:
        """`<prefix>_METRICS_TIMEOUT` (seconds) and `<prefix>_METRICS_MAX_CONNECTIONS`."""
        default = cls()
        return cls(
            timeout_seconds=Seconds(f"{prefix}_METRICS_TIMEOUT", default.timeout_seconds).read(environ),
            max_connections=PositiveInt(f"{prefix}_METRICS_MAX_CONNECTIONS", default.max_connections).read(
                environ
            ),
        )


@dataclass(frozen=True)
class MetricsPort:
    """Where gunicorn's master serves its workers' metrics, `<prefix>_METRICS_BIND` (HOST:PORT; "" or off:
    nowhere), and the port's limits."""

    bind: str
    limits: MetricsLimits = MetricsLimits()

    @classmethod
    def from_env(cls, prefix: str, environ: Mapping[str, str], bind: str) -> MetricsPort:
        reader = Text(f"{prefix}_METRICS_BIND", bind, blank="")
        value = reader.read(environ)
        try:
            parse_bind(value)
        except ValueError:
            raise SettingError(reader.name, "HOST:PORT, or '' or off for no metrics", value) from None
        return cls(value, MetricsLimits.from_env(prefix, environ))


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_HEAD_END = b"\r\n\r\n"
_TOO_LARGE = b"HTTP/1.0 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\r\n"
_BAD_REQUEST = b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n"


class _Client:
    __slots__ = ("deadline", "inbox", "outbox", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.inbox = bytearray()
        self.outbox: memoryview | None = None  # the answer, once the request is in


class MetricsServer:
    """HTTP/1.0 for a WSGI app from one thread: every connection has a deadline, and there are few of them.

    Each connection sends one request and gets one answer, then is closed (as prometheus_client's server
    does). The app runs in the server thread: a scrape is the only request, and it is quick.
    """

    TICK_SECONDS = 0.25

    def __init__(self, address: tuple[str, int], app: WsgiApp, limits: MetricsLimits) -> None:
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((host, port))
            self._listener.listen(128)
        except OSError:
            self._listener.close()
            raise
        self._listener.setblocking(False)
        self.server_address = self._listener.getsockname()[:2]
        self._app = app
        self._limits = limits
        self._clients: dict[socket.socket, _Client] = {}  # insertion order: the oldest first
        self._selector = selectors.DefaultSelector()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-server", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    @property
    def connections(self) -> int:
        return len(self._clients)

    def _run(self) -> None:
        self._selector.register(self._listener, selectors.EVENT_READ)
        try:
            while not self._stopping.is_set():
                for key, events in self._selector.select(self.TICK_SECONDS):
                    if key.fileobj is self._listener:
                        self._accept()
                    else:
                        self._serve(key.data, events)
                self._expire(time.monotonic())
        finally:
            for client in list(self._clients.values()):
                self._close(client)
            self._selector.close()
            self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: the others are still served
                log.warning("metrics server cannot accept: %s", exc)
                return
            if len(self._clients) >= self._limits.max_connections:
                self._close(next(iter(self._clients.values())))  # the oldest makes room
            sock.setblocking(False)
            client = _Client(sock, time.monotonic() + self._limits.timeout_seconds)
            self._clients[sock] = client
            self._selector.register(sock, selectors.EVENT_READ, client)

    def _serve(self, client: _Client, events: int) -> None:
        try:
            if client.outbox is None and events & selectors.EVENT_READ:
                data = client.sock.recv(4096)
                if not data:
                    self._close(client)
                    return
                client.inbox += data
                answer = self._answer(client.inbox)
                if answer is None:
                    return
                client.outbox = memoryview(answer)
                self._selector.modify(client.sock, selectors.EVENT_WRITE, client)
            if client.outbox is not None:
                sent = client.sock.send(client.outbox)
                client.outbox = client.outbox[sent:]
                if not client.outbox:
                    self._close(client)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(client)

    def _answer(self, inbox: bytearray) -> bytes | None:
        end = inbox.find(_HEAD_END)
        if end > self._limits.max_request_bytes or (end < 0 and len(inbox) > self._limits.max_request_bytes):
            return _TOO_LARGE
        if end < 0:
            return None
        lines = bytes(inbox[:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return _BAD_REQUEST
        method, target, _version = parts
        path, _, query = target.partition("?")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": method,
            "PATH_INFO": unquote(path, "latin-1"),
            "QUERY_STRING": query,
            "SERVER_PROTOCOL": "HTTP/1.0",
            "wsgi.input": io.BytesIO(),
        }
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                environ["HTTP_" + name.strip().upper().replace("-", "_")] = value.strip()
        started: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], _exc_info: Any = None) -> None:
            started[:] = [status, headers]

        body = b"".join(self._app(environ, start_response))
        status, headers = started
        head = [f"HTTP/1.0 {status}", f"Date: {email.utils.formatdate(usegmt=True)}"]
        head += [f"{name}: {value}" for name, value in headers]
        head += [f"Content-Length: {len(body)}", "Connection: close"]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (b"" if method == "HEAD" else body)

    def _expire(self, now: float) -> None:
        for client in [c for c in self._clients.values() if c.deadline <= now]:
            self._close(client)

    def _close(self, client: _Client) -> None:
        if self._clients.pop(client.sock, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(client.sock)
        client.sock.close()


def serve(bind: str, limits: MetricsLimits | None = None) -> MetricsServer | None:
    """Serve the summed metrics on `bind` from a thread of this (master) process; None when disabled."""
    address = parse_bind(bind)
    if address is None:
        return None
    from prometheus_client import CollectorRegistry, make_wsgi_app
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    server = MetricsServer(address, make_wsgi_app(registry), limits or MetricsLimits()).start()
    host, port = address
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

    def __init__(self, server_name: str, port: MetricsPort) -> None:
        # The address was checked with the server's settings, when gunicorn read its config.
        self.server_name = server_name
        self.bind = port.bind
        self.limits = port.limits

    def on_starting(self, _server: Any) -> None:
        prepare_directory(self.server_name)

    def when_ready(self, server: Any) -> None:
        try:
            serve(self.bind, self.limits)
        except OSError as exc:
            # The servers' real work goes on without metrics; the error says which port was taken.
            server.log.error("metrics server on %s did not start: %s", self.bind, exc)

    def child_exit(self, _server: Any, worker: Any) -> None:
        worker_exited(worker.pid)

    def on_exit(self, _server: Any) -> None:
        cleanup()
