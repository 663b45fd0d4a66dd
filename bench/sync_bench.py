"""Sync hook latency through HTTP (flask test client, orjson), printed as a table.

    python bench/sync_bench.py [--repeat N]

Targets: bench/README.md#targets. Each case reports p50/p99 server time and its ratio to the
target, so a noisy shared machine shows up as a ratio rather than a flaky assert.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainop.jsontypes import Json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hooks.app import create_app
from tests.builders import container, job, replica
from trainop.job.settings import Settings

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def pytorch_job(workers: int) -> Json:
    image = "docker.io/pytorch/pytorch:2.1.2-cuda11.8-cudnn8-runtime"
    main = container(
        "pytorch",
        image,
        command=["torchrun", "train.py"],
        resources={"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": "1"}},
    )
    spec = replica("PyTorchJob", 1, [main])
    return job("PyTorchJob", name="bench", Master=spec, Worker={**spec, "replicas": workers})


def observed(children: list[Json], phase: str) -> dict[str, dict[str, Json]]:
    """The desired children as Metacontroller would report them once created and running."""
    out: dict[str, dict[str, Json]] = {}
    for i, child in enumerate(children):
        obj = copy.deepcopy(child)
        meta = obj["metadata"]
        meta.update(uid=f"uid-{i}", resourceVersion=str(1000 + i), creationTimestamp="2026-01-01T00:00:00Z")
        meta.setdefault("labels", {})["controller-uid"] = "uid-bench"
        meta["ownerReferences"] = [
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "name": "bench",
                "uid": "uid-bench",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        if obj["kind"] == "Pod":
            obj["status"] = {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": "pytorch",
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                    }
                ],
            }
        key = f"{obj['kind']}.{obj['apiVersion']}"
        out.setdefault(key, {})[meta["name"]] = obj
    return out


def measure(fn: Callable[[], Any], repeat: int) -> list[float]:
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    client = create_app(settings=Settings(), clock=lambda: NOW).test_client()
    cases: list[tuple[str, bytes, float]] = []
    for workers, target in ((1, 10.0), (1000, 500.0)):
        parent = pytorch_job(workers)
        first = client.post("/sync", json={"parent": parent, "children": {}}).get_json()
        running = {**parent, "status": first["status"]}
        body = {"parent": running, "children": observed(first["children"], "Running")}
        cases.append((f"{workers + 1} replicas, all running", json.dumps(body).encode(), target))
        done = observed(first["children"], "Succeeded")
        finished = client.post("/sync", json={"parent": running, "children": done}).get_json()
        body = {"parent": {**parent, "status": finished["status"]}, "children": done}
        cases.append((f"{workers + 1} replicas, finished resync", json.dumps(body).encode(), target))
    rows = []
    for name, payload, target in cases:

        def call(payload: bytes = payload) -> None:
            response = client.post("/sync", data=payload, content_type="application/json")
            assert response.status_code == 200, response.data[:200]

        gc.collect()
        samples = sorted(measure(call, args.repeat))
        p50 = statistics.median(samples)
        p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
        tracemalloc.start()
        call()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        rows.append((name, len(payload) / 1024, p50, p99, target, p99 / target, peak))
    print(
        f"{'case':34} {'request KiB':>11} {'p50 ms':>8} {'p99 ms':>8} {'target p99':>10} "
        f"{'p99/target':>10} {'peak MiB':>8}"
    )
    for name, size, p50, p99, target, ratio, peak in rows:
        print(f"{name:34} {size:11.0f} {p50:8.2f} {p99:8.2f} {target:10.0f} {ratio:10.2f} {peak:8.1f}")


if __name__ == "__main__":
    main()
