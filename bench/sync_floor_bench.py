"""The sync hook's server time next to its JSON floor, for PyTorchJob and TFJob from 1 to 5000 replicas.

    python bench/sync_floor_bench.py [--sizes 1,10,100,1000,5000] [--repeat N] [--profile SIZE] [--rss]

Each case is a resync of a running job whose observed children are what the apiserver really holds
(tests/realistic.py: full pod status, managedFields, Metacontroller's last-applied annotation). "server"
is the hook's WSGI app from request bytes in to response bytes out (what gunicorn hands over and gets
back); "floor" is orjson decoding the same request and encoding the same response, nothing else. The
ratio server/floor says what the hook adds on top of the JSON it cannot avoid.

`--profile SIZE` prints a cProfile of the hook at that size (PyTorchJob) instead of the table; `--rss`
adds the resident memory of a gunicorn worker idle and at its peak over 1000-replica syncs.
Targets (bench/README.md#targets): server <= 1.5x floor at >= 100 replicas; small sync p99 <= 2 ms; RSS
per worker idle <= 60 MB, peak <= 200 MB at 1000 replicas. Never asserted: a busy machine shows in the
ratios.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import http.client
import io
import logging
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hooks.app import create_app
from tests.realistic import resync_request
from tests.servers import serve
from trainop.job.settings import Settings

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def running_request(kind: str, replicas: int) -> bytes:
    return resync_request(kind, replicas, NOW)


def wsgi_call(app: Any, payload: bytes) -> bytes:
    """One POST /sync through the WSGI app, as gunicorn makes it (bytes in, bytes out)."""
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/sync",
        "SERVER_NAME": "bench",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(payload)),
        "wsgi.input": io.BytesIO(payload),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    status: list[str] = []
    chunks = app(environ, lambda s, _headers: status.append(s))
    out = b"".join(chunks)
    assert status[0].startswith("200"), out[:300]
    return out


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    fn()  # warm caches
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples)


def p99(samples: list[float]) -> float:
    return samples[min(len(samples) - 1, int(len(samples) * 0.99))]


def repeats(replicas: int, base: int) -> int:
    return max(5, min(base, 20_000 // max(replicas, 1)))


# TF_CONFIG lists every replica in every pod (twice, with Metacontroller's last-applied annotation), so a
# TFJob's request grows with the square of its replicas; past this a case is reported, not built.
MAX_BENCH_REQUEST = 512 * 2**20


def table(sizes: list[int], repeat: int) -> None:
    app = create_app(Settings(), clock=lambda: NOW)
    # Measured past the server's default body limit (128 MiB) so that large TFJobs show their cost.
    app.config["MAX_CONTENT_LENGTH"] = MAX_BENCH_REQUEST
    print(f"{'kind':11} {'replicas':>8} {'request MiB':>11} {'server p50':>10} {'server p99':>10} "
          f"{'floor p50':>9} {'floor p99':>9} {'p50 ratio':>9}")  # fmt: skip
    for kind in ("PyTorchJob", "TFJob"):
        last = (1, 1.0)
        for replicas in sizes:
            growth = 2 if kind == "TFJob" else 1
            estimate = last[1] * (replicas / last[0]) ** growth
            if estimate > MAX_BENCH_REQUEST:
                print(f"{kind:11} {replicas:8} {estimate / 2**20:11.0f} not run: request over 512 MiB")
                continue
            payload = running_request(kind, replicas)
            last = (replicas, float(len(payload)))
            response = orjson.loads(wsgi_call(app, payload))
            n = repeats(replicas, repeat)
            server = timed(lambda payload=payload: wsgi_call(app, payload), n)
            floor = timed(
                lambda payload=payload, response=response: (orjson.loads(payload), orjson.dumps(response)), n
            )
            ratio = statistics.median(server) / statistics.median(floor)
            print(
                f"{kind:11} {replicas:8} {len(payload) / 2**20:11.2f} {statistics.median(server):10.2f} "
                f"{p99(server):10.2f} {statistics.median(floor):9.2f} {p99(floor):9.2f} {ratio:9.2f}"
            )


def profile(replicas: int) -> None:
    app = create_app(Settings(), clock=lambda: NOW)
    payload = running_request("PyTorchJob", replicas)
    wsgi_call(app, payload)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        wsgi_call(app, payload)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def rss_mib(pid: int) -> tuple[float, float]:
    """(current, peak) resident set of a process, MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def rss() -> None:
    from tests.servers import worker_pids

    small, large = running_request("PyTorchJob", 2), running_request("PyTorchJob", 1000)
    with tempfile.TemporaryDirectory() as tmp, serve("hooks", Path(tmp), workers=1) as server:
        [pid] = worker_pids(server)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)

        def post(payload: bytes) -> None:
            conn.request("POST", "/sync", payload, {"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            assert response.status == 200

        for _ in range(20):
            post(small)
        idle, _ = rss_mib(pid)
        for _ in range(5):
            post(large)
        after, peak = rss_mib(pid)
    print(f"gunicorn worker RSS: idle after small syncs {idle:.1f} MiB (target 60); "
          f"peak over 1000-replica syncs {peak:.1f} MiB (target 200); after {after:.1f} MiB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,10,100,1000,5000")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--profile", type=int, default=0, metavar="REPLICAS")
    parser.add_argument("--rss", action="store_true")
    args = parser.parse_args()
    # The server writes one log line per call; here it goes nowhere instead of flooding the table.
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the process
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"Python {platform.python_version()}, orjson {orjson.__version__}")  # fmt: skip
    if args.profile:
        profile(args.profile)
        return
    table([int(s) for s in args.sizes.split(",")], args.repeat)
    if args.rss:
        rss()


if __name__ == "__main__":
    main()
