"""The hook and webhook servers as they run in a pod: gunicorn with their config modules, on loopback.

`serve("hooks", tmp_path)` yields a `Server` with the app and metrics addresses; its log tells whether a
worker died (gunicorn boots a replacement for every worker that exits).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
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


def _wait_up(
    url: str,
    proc: subprocess.Popen[bytes],
    log: Path,
    timeout: float = 30,
    context: ssl.SSLContext | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context):
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
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """TERM, as the kubelet stops a pod; KILL if gunicorn has not exited 30 s later."""
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


# Slow clients: connections that start a request and stop, and the server they are aimed at over TLS.

SLOW_BYTE = b"\x16"  # the first byte of a TLS ClientHello; on a plain HTTP port, the start of a request line


def make_cert(directory: Path) -> tuple[Path, Path]:
    """A self-signed serving certificate for 127.0.0.1 as tls.crt/tls.key."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def _wait_tls_up(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Up once /healthz answers over TLS; the test's own certificate is not verified."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    _wait_up(f"https://127.0.0.1:{port}/healthz", proc, log, context=context)


@contextlib.contextmanager
def serve_webhooks_tls(tmp_path: Path, workers: int = 2, **env: str) -> Iterator[tuple[Server, Path]]:
    """gunicorn serving the webhooks over TLS with a fresh certificate; yields the server and the cert."""
    cert, key = make_cert(tmp_path / "certs")
    port, metrics_port = free_ports(2)
    log = tmp_path / f"webhooks-tls-{port}.log"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOP_")}
    full_env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    full_env |= {
        "PYTHONPATH": str(REPO),
        "TRAINOP_WEBHOOK_BIND": f"127.0.0.1:{port}",
        "TRAINOP_WEBHOOK_METRICS_BIND": f"127.0.0.1:{metrics_port}",
        "TRAINOP_WEBHOOK_WORKERS": str(workers),
        "TRAINOP_TLS_CERT_FILE": str(cert),
        "TRAINOP_TLS_KEY_FILE": str(key),
        **env,
    }
    argv = [sys.executable, "-m", "gunicorn", "-c", "python:webhooks.gunicorn_conf", "webhooks.app:app"]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    server = Server(proc, port, metrics_port, log, workers)
    try:
        _wait_tls_up(port, proc, log)
        _wait_up(f"http://127.0.0.1:{metrics_port}/metrics", proc, log)
        server.wait_booted(workers)
        yield server, cert
    finally:
        _stop(proc)


@contextlib.contextmanager
def slow_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` loopback connections to `port` that each send one byte and then nothing; closed at the end."""
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(SLOW_BYTE)
            opened.append(sock)
        yield opened
    finally:
        for sock in opened:
            sock.close()


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes `sock` (end of stream or reset) within `timeout` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass  # a refusal (431, 400) before the close is still a close
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def threads(pid: int) -> int:
    """The number of threads of process `pid`, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no Threads line for pid {pid}")
