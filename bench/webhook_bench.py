"""Admission webhook latency: in-process, and through gunicorn over TLS with a keep-alive client.

    python bench/webhook_bench.py [--requests N]

Prints one row per case with p50/p99 and the ratio of p99 to its target (25 ms, bench/README.md#targets), so a
noisy shared machine shows as a ratio rather than a flaky assert.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.builders import admission_review, container, job, replica  # noqa: E402
from trainop.local.ports import free_ports  # noqa: E402
from webhooks.app import create_app  # noqa: E402

TARGET_P99_MS = 25.0


def review_body() -> bytes:
    main = container(
        "pytorch",
        "docker.io/pytorch/pytorch:2.1.2",
        command=["torchrun", "train.py"],
        resources={"limits": {"nvidia.com/gpu": "1"}},
    )
    spec = replica("PyTorchJob", 1, [main])
    obj = job("PyTorchJob", name="bench", Master=spec, Worker={**spec, "replicas": 8})
    return json.dumps(admission_review(obj)).encode()


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def timed(fn: Callable[[], None], n: int) -> list[float]:
    fn()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def in_process(body: bytes, n: int) -> dict[str, list[float]]:
    client = create_app().test_client()
    rows = {}
    for path in ("/mutate", "/validate"):

        def call(path: str = path) -> None:
            assert client.post(path, data=body, content_type="application/json").status_code == 200

        rows[f"in-process {path}"] = timed(call, n)
    return rows


def over_tls(body: bytes, n: int) -> dict[str, list[float]]:
    tmp = Path(tempfile.mkdtemp(prefix="trainop-bench-"))
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=bench",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(tmp / "tls.key"),
            "-out",
            str(tmp / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )
    (port,) = free_ports(1)
    env = {
        **os.environ,
        "TRAINOP_WEBHOOK_BIND": f"127.0.0.1:{port}",
        "TRAINOP_TLS_CERT_FILE": str(tmp / "tls.crt"),
        "TRAINOP_TLS_KEY_FILE": str(tmp / "tls.key"),
        "TRAINOP_WEBHOOK_LOG_LEVEL": "warning",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "python:webhooks.gunicorn_conf", "webhooks.app:app"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    context = ssl.create_default_context(cafile=str(tmp / "tls.crt"))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        rows = {}
        for path in ("/mutate", "/validate"):

            def call(path: str = path) -> None:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                assert response.status == 200

            rows[f"gunicorn TLS keep-alive {path}"] = timed(call, n)
        return rows
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    body = review_body()
    rows = {**in_process(body, args.requests), **over_tls(body, args.requests)}
    print(f"request body: {len(body)} bytes, {args.requests} requests per case, one client")
    print(f"{'case':34} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'p99/target':>10}")
    for name, samples in rows.items():
        p50, p99 = percentiles(samples)
        rate = len(samples) / (sum(samples) / 1000)
        print(f"{name:34} {p50:8.2f} {p99:8.2f} {rate:8.0f} {p99 / TARGET_P99_MS:10.2f}")


if __name__ == "__main__":
    main()
