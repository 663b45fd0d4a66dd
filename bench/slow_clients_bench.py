"""Slow clients against every port: how long a real request waits while N connections each send one byte.

    python bench/slow_clients_bench.py [--counts 0,200,1000] [--ports hooks,webhooks,hooks-metrics,...]
                                       [--trickle-bodies]

For each port (the hook port, plain HTTP; the webhook port over TLS; the metrics ports of both servers) and
each N, a fresh gunicorn with the shipped config, N loopback connections that send one byte and stop, then
real requests on fresh connections (a sync, an AdmissionReview over a full TLS handshake, a scrape). Prints
the slowest probe, its ratio to the 1 s target (bench/README.md#targets), how long the server took to close
all N slow connections, and the gunicorn master's thread count with the N open. `--trickle-bodies` makes
each slow connection send a whole request head announcing a 4 MiB body, then 1 KiB of it (plain HTTP
ports only: hooks, hooks-metrics, webhooks-metrics).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import selectors
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.builders import admission_review, job  # noqa: E402
from tests.servers import Server, serve, serve_webhooks_tls, slow_connections, threads  # noqa: E402

TARGET_SECONDS = 1.0
PROBE_TIMEOUT = 15.0
PROBES = 2
CLOSE_WAIT = 30.0


def sync_probe(server: Server) -> None:
    body = {"parent": job("XGBoostJob", name="probe", namespace="bench", Master=1), "children": {}}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=PROBE_TIMEOUT)
    try:
        conn.request("POST", "/sync", json.dumps(body), {"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def admission_probe(server: Server, cert: Path) -> None:
    context = ssl.create_default_context(cafile=str(cert))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=PROBE_TIMEOUT, context=context)
    try:
        body = json.dumps(admission_review(job("JAXJob", Worker=1)))
        conn.request("POST", "/validate", body, {"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
    finally:
        conn.close()


def scrape_probe(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.metrics_port, timeout=PROBE_TIMEOUT)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        response.read()  # the webhooks' text is empty until their first request
        assert response.status == 200
    finally:
        conn.close()


Case = Callable[[Path], AbstractContextManager[tuple[Server, int, Callable[[], None]]]]


@contextmanager
def hooks_port(tmp: Path) -> Iterator[tuple[Server, int, Callable[[], None]]]:
    with serve("hooks", tmp) as server:
        yield server, server.port, lambda: sync_probe(server)


@contextmanager
def webhooks_port(tmp: Path) -> Iterator[tuple[Server, int, Callable[[], None]]]:
    with serve_webhooks_tls(tmp) as (server, cert):
        yield server, server.port, lambda: admission_probe(server, cert)


@contextmanager
def metrics_port(which: str, tmp: Path) -> Iterator[tuple[Server, int, Callable[[], None]]]:
    with serve(which, tmp) as server:
        yield server, server.metrics_port, lambda: scrape_probe(server)


CASES: dict[str, Case] = {
    "hooks :8080 (sync)": hooks_port,
    "webhooks :9443 (TLS AdmissionReview)": webhooks_port,
    "hooks metrics :8081 (scrape)": lambda tmp: metrics_port("hooks", tmp),
    "webhooks metrics :8082 (scrape)": lambda tmp: metrics_port("webhooks", tmp),
}
SHORT = dict(zip(["hooks", "webhooks", "hooks-metrics", "webhooks-metrics"], CASES, strict=True))


def probe_seconds(probe: Callable[[], None]) -> float | None:
    start = time.monotonic()
    try:
        probe()
    except (OSError, AssertionError, http.client.HTTPException):
        return None
    return time.monotonic() - start


def seconds_until_closed(socks: list[socket.socket], opened_at: float) -> float | None:
    """Seconds from opening until the server had closed every slow connection; None if not within the wait."""
    if not socks:
        return 0.0
    selector = selectors.DefaultSelector()
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    open_ = len(socks)
    deadline = opened_at + CLOSE_WAIT
    while open_:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        for key, _ in selector.select(remaining):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                selector.unregister(sock)
                open_ -= 1
    return time.monotonic() - opened_at


TRICKLE_HEAD = (
    b"POST /sync HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: 4194304\r\n\r\n"
)


@contextmanager
def trickling_bodies(port: int, count: int) -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(TRICKLE_HEAD + b"[" * 1024)
            opened.append(sock)
        yield opened
    finally:
        for sock in opened:
            with contextlib.suppress(OSError):
                sock.close()


def run(name: str, case: Case, count: int, trickle: bool) -> str:
    slow = trickling_bodies if trickle else slow_connections
    with tempfile.TemporaryDirectory() as tmp, case(Path(tmp)) as (server, port, probe):
        probe()  # warm
        with slow(port, count) as socks:
            opened_at = time.monotonic()
            time.sleep(0.5)
            held = threads(server.proc.pid)
            samples = [probe_seconds(probe) for _ in range(PROBES)]
            closed = seconds_until_closed(socks, opened_at)
    worst = None if None in samples else max(s for s in samples if s is not None)
    probe_text = f"{worst * 1000:.0f} ms" if worst is not None else f"no answer in {PROBE_TIMEOUT:.0f} s"
    ratio = f"{worst / TARGET_SECONDS:.2f}" if worst is not None else f">{PROBE_TIMEOUT / TARGET_SECONDS:.0f}"
    closed_text = f"{closed:.1f} s" if closed is not None else f"not within {CLOSE_WAIT:.0f} s"
    return f"| {name} | {count} | {probe_text} | {ratio} | {closed_text if count else '-'} | {held} |"


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--counts", default="0,200,1000")
    parser.add_argument("--ports", default=",".join(SHORT))
    parser.add_argument("--trickle-bodies", action="store_true")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    print("| Port (probe) | slow connections | slowest probe | / 1 s target | all slow ones closed after |"
          " master threads |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for short in args.ports.split(","):
        name = SHORT[short]
        for count in counts:
            print(run(name, CASES[name], count, args.trickle_bodies), flush=True)


if __name__ == "__main__":
    main()
