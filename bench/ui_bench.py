"""The web UI's list page with 2,000 jobs: server time, and the memory of the summary the UI keeps.

    python bench/ui_bench.py [--jobs N] [--repeat N] [--only list|streams]

Cases: the cluster source with N jobs in its watched summary (each user's access answer cached, as after
the first page), the first page, a filtered page and the last page; and the local source over N run
folders (`run.json` files, re-read only when they change). Server time is the WSGI app's, bytes in to bytes
out (flask's test client). Memory: the Python heap the summaries take (tracemalloc) and the process RSS.

Then `trainop ui --cluster` as the chart runs it (gunicorn, one worker) over a fake apiserver that lists
the N jobs: the first page over HTTP (client time, loopback), and the worker process's RSS with the N
jobs watched, idle and with every allowed event stream (64) open.

Streams (`--only streams` runs just these): `trainop ui --cluster --auth proxy` under gunicorn over the
tests' fake apiserver (tests/ui/fakeapi.py): the worker's threads and the apiserver's open log follows
after 10 views of a 200-pod job's page; the apiserver requests per second while 64 event streams of one
job are open and idle (16 each of 4 users, the per-user quota), and the worker's threads once they close;
the worker's peak RSS (VmHWM) over 10 views of a job whose namespace holds 20,000 Events.
Target: bench/README.md#targets.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.ui.fakeapi import FakeApi, event
from tests.ui.helpers import pod, pytorch, with_status, write_run
from trainop.kubeclient import KubeClient
from trainop.ui.app import create_app
from trainop.ui.auth import token_key
from trainop.ui.cluster import Cluster
from trainop.ui.runs import Runs
from trainop.ui.settings import UiSettings
from trainop.ui.summary import summarize

TARGET_MS = 200.0
STATES = (
    ("Running", "PyTorchJobRunning"),
    ("Succeeded", "PyTorchJobSucceeded"),
    ("Failed", "BackoffLimitExceeded"),
)


def jobs(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        counts = {"Master": {"active": 1}, "Worker": {"active": 2}}
        obj = with_status(pytorch(f"job-{i:05d}", f"team-{i % 20}"), ("Created", "PyTorchJobCreated"),
                          STATES[i % 3], replicaStatuses=counts)  # fmt: skip
        obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": f"queue-{i % 5}"}
        out.append(obj)
    return out


def cluster(n: int) -> tuple[Cluster, float]:
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    source = Cluster(KubeClient(server="https://unused.invalid", context=None))  # type: ignore[arg-type]
    for obj in jobs(n):
        key = f"{obj['metadata']['namespace']}/PyTorchJob/{obj['metadata']['name']}"
        source.jobs["PyTorchJob"][key] = summarize(obj, key, None)
    heap = (tracemalloc.get_traced_memory()[0] - before) / 2**20
    tracemalloc.stop()
    # As after a user's first page: the access review's answer is cached for ACCESS_SECONDS.
    anyone = (token_key(""), (), "list", "pytorchjobs.kubeflow.org", "", "")
    source.access.put(anyone, True, 3600, time.monotonic())
    return source, heap


def runs(n: int, root: Path) -> Runs:
    for obj in jobs(n):
        write_run(root, obj["metadata"]["name"], obj, pods=[pod(f"{obj['metadata']['name']}-worker-0")])
    return Runs(root)


def timed(client: Any, url: str, repeat: int) -> tuple[float, float, int]:
    client.get(url)
    times, size = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        answer = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        assert answer.status_code == 200, answer.status_code
        size = len(answer.data)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1], size


def fake_apiserver(items: list[dict[str, Any]]) -> ThreadingHTTPServer:
    """Lists `items` as the PyTorchJobs, holds watches open, allows every access review."""
    listed = json.dumps({"items": items, "metadata": {"resourceVersion": "1"}}).encode()
    empty = json.dumps({"items": [], "metadata": {"resourceVersion": "1"}}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if "watch=1" in self.path:
                self.send_response(200)
                self.end_headers()
                time.sleep(600)
                return
            self._send(listed if "pytorchjobs" in self.path else empty)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(b'{"status": {"allowed": true}}')

        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# The secret the bench's proxy shares with the UI (proxy mode refuses to start without one).
PROXY_SECRET = "bench-proxy"


def ui_cluster(folder: Path, api_port: int, extra: list[str], stderr: int) -> subprocess.Popen[str]:
    """`trainop ui --cluster` under gunicorn, with a kubeconfig for the fake apiserver on `api_port`."""
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{api_port}"}}],
        "users": [{"name": "ui", "user": {"token": "fake"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "ui"}}],
    }))  # fmt: skip
    env = {**os.environ, "TRAINOP_KUBECONFIG": str(kubeconfig), "TRAINOP_UI_PROXY_SECRET": PROXY_SECRET}
    return subprocess.Popen(
        [sys.executable, "-m", "trainop.cli", "ui", "--cluster", *extra, "--port", "0"],
        cwd=Path(__file__).resolve().parents[1], env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
    )  # fmt: skip


@contextlib.contextmanager
def served(n: int, folder: Path) -> Iterator[tuple[str, int]]:
    """`trainop ui --cluster` under gunicorn over N jobs: its URL and worker's pid, once all are listed."""
    api = fake_apiserver(jobs(n))
    proc = ui_cluster(folder, api.server_address[1], [], subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        url = next(line for line in proc.stdout if " at http://" in line).split(" at ", 1)[1].split()[0]
        last = f"job-{n - 1:05d}"
        while last not in http_get(url, f"/?sort=name&order=desc&q={last}")[1]:
            time.sleep(0.2)
        (worker,) = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        yield url, int(worker)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        api.shutdown()


def http_get(url: str, path: str) -> tuple[float, str]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    start = time.perf_counter()
    conn.request("GET", path)
    body = conn.getresponse().read().decode()
    elapsed = (time.perf_counter() - start) * 1000
    conn.close()
    return elapsed, body


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def gunicorn_case(n: int, repeat: int) -> tuple[list[tuple[str, float, float, int]], float, float]:
    with tempfile.TemporaryDirectory() as folder, served(n, Path(folder)) as (url, worker):
        times = sorted(http_get(url, "/")[0] for _ in range(repeat))
        size = len(http_get(url, "/")[1])
        idle = rss_mib(worker)
        parts = urllib.parse.urlsplit(url)
        streams = []
        for _ in range(UiSettings.max_streams):
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
            conn.request("GET", "/stream/list")
            answer = conn.getresponse()
            assert answer.status == 200, answer.status
            answer.readline()
            streams.append(conn)
        time.sleep(2)  # every stream has polled the summary at least once
        busy = rss_mib(worker)
        during = sorted(http_get(url, "/")[0] for _ in range(repeat))
        for conn in streams:
            conn.close()
    rows = [
        ("gunicorn over HTTP, first page", statistics.median(times), times[int(len(times) * 0.95) - 1], size),
        (f"gunicorn over HTTP, first page, {UiSettings.max_streams} streams open",
         statistics.median(during), during[int(len(during) * 0.95) - 1], size),
    ]  # fmt: skip
    return rows, idle, busy


def proc_status(pid: int, field: str) -> int:
    """A number of /proc/PID/status (VmHWM, VmRSS in KiB; Threads)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


@contextlib.contextmanager
def served_over(fake: FakeApi, folder: Path) -> Iterator[tuple[str, int]]:
    """`trainop ui --cluster --auth proxy` under gunicorn over `fake`: its URL and worker's pid."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, fake.app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proc = ui_cluster(folder, server.server_port, ["--auth", "proxy"], subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        url = next(line for line in proc.stdout if " at http://" in line).split(" at ", 1)[1].split()[0]
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        while not children.read_text().split():  # gunicorn is ready before it forks the worker
            time.sleep(0.1)
        (worker,) = children.read_text().split()
        yield url, int(worker)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        server.shutdown()


def as_user(url: str, path: str, name: str) -> http.client.HTTPResponse:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    conn.request("GET", path, headers={"X-Trainop-Proxy-Secret": PROXY_SECRET, "X-Forwarded-User": name})
    return conn.getresponse()


def streams_case() -> dict[str, float]:
    job = "/job/team-a/PyTorchJob/mnist"
    out: dict[str, float] = {}
    quiet = logging.getLogger("werkzeug")
    quiet.setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as folder:
        fake = FakeApi()
        fake.workers = 200
        with served_over(fake, Path(folder)) as (url, worker):
            as_user(url, "/healthz", "alice").read()
            out["threads_before"] = proc_status(worker, "Threads")
            for _ in range(10):
                answer = as_user(url, job, "alice")
                assert answer.status == 200, answer.status
                answer.read()
            time.sleep(2)
            out["threads_after_views"] = proc_status(worker, "Threads")
            out["follows_after_views"] = fake.follows_open

            logs = as_user(url, f"/stream/logs{job.removeprefix('/job')}", "alice")
            logs.readline()
            time.sleep(2)
            out["follows_with_log_stream"] = fake.follows_open
            logs.close()
            time.sleep(3)
            out["follows_after_log_stream"] = fake.follows_open

            fake.workers = 2
            streams = [as_user(url, f"/stream{job}", f"user-{i // 16}") for i in range(64)]
            assert [s.status for s in streams] == [200] * 64, [s.status for s in streams]
            for answer in streams:
                answer.readline()
            time.sleep(3)  # every stream has subscribed
            out["threads_with_streams"] = proc_status(worker, "Threads")
            start, seen = time.monotonic(), len(fake.seen)
            reads = sum(1 for _, p, _ in fake.seen if p.endswith("/pytorchjobs/mnist"))
            time.sleep(10)
            elapsed = time.monotonic() - start
            # The job's reads and the access reviews; not the summary's list of every kind, which the
            # fake answers 404 and the UI retries every 5 s.
            asked = fake.seen[seen:]
            out["requests_per_s"] = (
                sum(1 for _, p, _ in asked if "/namespaces/" in p or "review" in p) / elapsed
            )
            out["job_reads_per_s"] = (
                sum(1 for _, p, _ in fake.seen if p.endswith("/pytorchjobs/mnist")) - reads
            ) / elapsed
            for answer in streams:
                answer.close()
            time.sleep(5)  # each stream's next write fails, and its thread ends
            out["threads_after_streams"] = proc_status(worker, "Threads")

            fake.events = [event(f"other-{i}", "Started", when=i % 3600) for i in range(20_000)]
            fake.event_items = 0
            before = proc_status(worker, "VmHWM")
            for _ in range(10):
                as_user(url, job, "alice").read()
            out["hwm_before_mib"] = before / 1024
            out["hwm_20000_events_mib"] = proc_status(worker, "VmHWM") / 1024
            out["event_items_sent"] = fake.event_items
    return out


def print_streams(f: dict[str, float]) -> None:
    rows = [
        ("worker threads: idle / after 10 views of a 200-pod job",
         f"{f['threads_before']:.0f} / {f['threads_after_views']:.0f}"),
        ("open log follows on the apiserver after those views", f"{f['follows_after_views']:.0f}"),
        ("that job's merged log stream: follows open / after it closed",
         f"{f['follows_with_log_stream']:.0f} / {f['follows_after_log_stream']:.0f}"),
        ("64 idle streams of one job: apiserver requests/s (of them GETs of the job)",
         f"{f['requests_per_s']:.1f} ({f['job_reads_per_s']:.1f})"),
        ("worker threads: 64 streams open / closed (gthread keeps its pool's threads)",
         f"{f['threads_with_streams']:.0f} / {f['threads_after_streams']:.0f}"),
        ("worker peak RSS before / after 10 views with 20,000 Events in the namespace",
         f"{f['hwm_before_mib']:.0f} / {f['hwm_20000_events_mib']:.0f} MiB"),
        ("Events the apiserver sent for those 10 views", f"{f['event_items_sent']:.0f}"),
    ]  # fmt: skip
    print(f"\nload average before the streams case: {os.getloadavg()[0]:.1f}")
    print("| Case | Figure |")
    print("| --- | --- |")
    for label, figure in rows:
        print(f"| {label} | {figure} |")
    print(json.dumps({k: round(v, 1) for k, v in f.items()}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--only", choices=("list", "streams"), default="")
    args = parser.parse_args()
    if args.only != "list":
        print_streams(streams_case())
    if args.only == "streams":
        return
    source, heap = cluster(args.jobs)
    app = create_app(source, UiSettings()).test_client()
    rows = []
    pages = (("first page", "/"), ("filtered (state, text)", "/?state=Failed&q=team-3"),
             ("last page, by name", f"/?sort=name&order=asc&page={args.jobs // 50}"))  # fmt: skip
    for label, url in pages:
        rows.append((f"cluster, {label}", *timed(app, url, args.repeat)))
    with tempfile.TemporaryDirectory() as folder:
        local = create_app(runs(args.jobs, Path(folder) / "runs"), UiSettings()).test_client()
        rows.append(("local runs, first page", *timed(local, "/", args.repeat)))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    served_rows, idle, busy = gunicorn_case(args.jobs, args.repeat)
    rows += served_rows
    print(f"{args.jobs} jobs, {args.repeat} requests per case")
    print(f"| Case | p50 | p95 | p95 / {TARGET_MS:.0f} ms | page bytes |")
    print("| --- | --- | --- | --- | --- |")
    for label, p50, p95, size in rows:
        print(f"| {label} | {p50:.1f} ms | {p95:.1f} ms | {p95 / TARGET_MS:.2f} | {size:,} |")
    print(f"\nsummary of {args.jobs} jobs in the cluster source: {heap:.1f} MiB of Python heap")
    print(f"peak RSS of this process (both sources, {args.jobs} run folders parsed): {rss:.0f} MiB")
    print(f"gunicorn worker of `trainop ui --cluster`, {args.jobs} jobs watched: RSS {idle:.0f} MiB idle, "
          f"{busy:.0f} MiB with {UiSettings.max_streams} event streams open")  # fmt: skip
    print(json.dumps({"heap_mib": round(heap, 1), "rss_mib": round(rss), "worker_idle_mib": round(idle),
                      "worker_streams_mib": round(busy)}))  # fmt: skip


if __name__ == "__main__":
    main()
