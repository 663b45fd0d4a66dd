"""The web UI's list page with 2,000 jobs: server time, and the memory of the summary the UI keeps.

    python bench/ui_bench.py [--jobs N] [--repeat N]

Cases: the cluster source with N jobs in its watched summary (each user's access answer cached, as after
the first page), the first page, a filtered page and the last page; and the local source over N run
folders (`run.json` files, re-read only when they change). Server time is the WSGI app's, bytes in to bytes
out (flask's test client). Memory: the Python heap the summaries take (tracemalloc) and the process RSS.
Target: bench/README.md#targets.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.ui.helpers import pod, pytorch, with_status, write_run
from trainop.kubeclient import KubeClient
from trainop.ui.app import Settings, create_app
from trainop.ui.cluster import Cluster
from trainop.ui.runs import Runs
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
    source.access[("", (), "PyTorchJob", "")] = (time.monotonic() + 3600, True)
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    source, heap = cluster(args.jobs)
    app = create_app(source, Settings()).test_client()
    rows = []
    pages = (("first page", "/"), ("filtered (state, text)", "/?state=Failed&q=team-3"),
             ("last page, by name", f"/?sort=name&order=asc&page={args.jobs // 50}"))  # fmt: skip
    for label, url in pages:
        rows.append((f"cluster, {label}", *timed(app, url, args.repeat)))
    with tempfile.TemporaryDirectory() as folder:
        local = create_app(runs(args.jobs, Path(folder) / "runs"), Settings()).test_client()
        rows.append(("local runs, first page", *timed(local, "/", args.repeat)))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.jobs} jobs, {args.repeat} requests per case")
    print(f"| Case | p50 | p95 | p95 / {TARGET_MS:.0f} ms | page bytes |")
    print("| --- | --- | --- | --- | --- |")
    for label, p50, p95, size in rows:
        print(f"| {label} | {p50:.1f} ms | {p95:.1f} ms | {p95 / TARGET_MS:.2f} | {size:,} |")
    print(f"\nsummary of {args.jobs} jobs in the cluster source: {heap:.1f} MiB of Python heap")
    print(f"peak RSS of this process (both sources, {args.jobs} run folders parsed): {rss:.0f} MiB")
    print(json.dumps({"heap_mib": round(heap, 1), "rss_mib": round(rss)}))


if __name__ == "__main__":
    main()
