"""Fan-out beside Kubeflow: the same PyTorchJob on our stack and on Kubeflow v1.9.4's, in one run.

    python bench/fanout_vs_kubeflow.py [--workers 100,1000] [--rounds 2] [--keep]

Brings up two e2e control planes on this machine (tests/e2e and tests/differential): ours (webhooks and
hooks under gunicorn, the real Metacontroller with the chart's flags) and Kubeflow's training-operator at
its own defaults (20 QPS, burst 30, one worker per kind: what its manifests run), each with a kwok node
roomy enough for the largest job. Then, for each size and round, applies a 1 Master + N Workers
PyTorchJob whose kwok pods stay Running, one side after the other (alternating which goes first, so load
from the machine's other work falls on both), and records from a watch of the job's pods and a poll of
the job:

* apply -> all N+1 pods exist,
* apply -> all N+1 pods Running,
* apply -> the job's Running condition True, and that time minus "all pods exist".

A benchmark, not an assert: it prints one table row per side, size and round, and each size's ratio of
medians (Kubeflow / ours). bench/README.md#fan-out-beside-kubeflow has the figures and the targets.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "differential"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from controlplane import ControlPlane, default_bin_dir, default_cache_dir
from fanout_bench import SETTLE_SECONDS, PodWatch, fanout_job
from kubeflow_stack import KubeflowStack, ensure_kubeflow_binary, kubeflow_dir
from trainop_stack import TrainopStack, ensure_binaries

# Kubeflow v1.9.4's training-operator flags at their defaults (cmd/training-operator.v1/main.go).
KUBEFLOW_DEFAULTS = "20 QPS, burst 30, 1 worker per kind"
POLL_SECONDS = 0.05


class Side(Protocol):
    cp: ControlPlane


def roomy_node(cp: ControlPlane, name: str, pods: int) -> None:
    """A kwok node that fits ``pods`` pods at once (the harness's holds 250)."""
    cp.create_node(name, pods=pods)
    room = {"cpu": str(pods), "memory": f"{pods}Gi", "pods": str(pods)}
    status = {"status": {"capacity": room, "allocatable": room}}
    cp.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status))


def job_running(cp: ControlPlane, namespace: str, name: str) -> bool:
    conn = http.client.HTTPSConnection("127.0.0.1", cp.api_port, context=cp.client_ssl_context(), timeout=10)
    try:
        conn.request("GET", f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}")
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        return False
    conditions = (json.loads(body).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions)


def measure(side: Side, workers: int, timeout: float, keep: bool = False) -> dict[str, Any]:
    """One job applied and timed; its namespace deleted after, unless ``keep`` (then returned in it)."""
    cp = side.cp
    namespace = f"fanout-{uuid.uuid4().hex[:6]}"
    cp.create_namespace(namespace)
    name = "fanout"
    total = workers + 1
    watch = PodWatch(side, namespace, name)  # type: ignore[arg-type]  # reads only .cp
    watch.start()
    t0 = time.monotonic()
    cp.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(fanout_job(name, workers)))
    deadline = t0 + timeout
    condition: float | None = None
    while time.monotonic() < deadline and (len(watch.running) < total or condition is None):
        if watch.error is not None:
            raise RuntimeError(f"pod watch failed: {watch.error}")
        if condition is None and job_running(cp, namespace, name):
            condition = time.monotonic()
        time.sleep(POLL_SECONDS)
    watch.stop.set()
    if len(watch.running) < total or condition is None:
        raise RuntimeError(
            f"after {timeout:.0f}s: {len(watch.created)}/{total} pods exist, {len(watch.running)} Running, "
            f"job Running condition {'seen' if condition else 'not seen'}"
        )
    all_exist = max(watch.created.values()) - t0
    if not keep:
        cp.kubectl(
            "delete", "namespace", namespace, "--wait=true", "--timeout=300s", check=False, timeout=320
        )  # fmt: skip
    return {
        "namespace": namespace,
        "all_exist": all_exist,
        "all_running": max(watch.running.values()) - t0,
        "condition": condition - t0,
        "condition_after_exist": condition - t0 - all_exist,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--workers", default="100,1000", help="comma list of worker counts")
    ap.add_argument("--rounds", type=int, default=2, help="measurements per side and size")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per measurement")
    ap.add_argument(
        "--metacontroller-rate",
        default="",
        metavar="QPS/BURST",
        help="our Metacontroller's client rate instead of the chart's flags",
    )
    ap.add_argument(
        "--metacontroller-flag",
        action="append",
        default=[],
        metavar="--FLAG=VALUE",
        help="one more of our Metacontroller's flags, overriding the chart's of that name (repeatable)",
    )
    ap.add_argument(
        "--side", choices=("both", "trainop", "kubeflow"), default="both", help="measure one side only"
    )
    ap.add_argument("--keep", action="store_true", help="keep the work dir with all component logs")
    args = ap.parse_args()
    sizes = [int(w) for w in args.workers.split(",") if w.strip()]

    work = Path(tempfile.mkdtemp(prefix="trainop-fanout-vs-"))
    bin_dir = default_bin_dir()
    ensure_binaries(bin_dir, work / "build-control-plane.log")
    flags = [*_rate_flags(args.metacontroller_rate), *args.metacontroller_flag]
    sides: dict[str, Side] = {}
    if args.side in ("both", "trainop"):
        sides["trainop"] = TrainopStack(work / "trainop", bin_dir, metacontroller_args=flags)
    if args.side in ("both", "kubeflow"):
        binary = ensure_kubeflow_binary(bin_dir, work / "build-kubeflow.log")
        crds = kubeflow_dir(default_cache_dir()) / "crds"
        sides["kubeflow"] = KubeflowStack(work / "kubeflow", bin_dir, binary, crds, client_flags=())
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    ok = False
    try:
        for side_name, side in sides.items():
            t = time.monotonic()
            side.start()  # type: ignore[attr-defined]
            roomy_node(side.cp, "kwok-fanout", max(sizes) + 50)
            print(f"{side_name} up in {time.monotonic() - t:.1f}s", file=sys.stderr)
        for workers in sizes:
            for round_ in range(args.rounds):
                order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
                for side_name in order:
                    time.sleep(SETTLE_SECONDS)  # token buckets refilled, the last namespace gone
                    r = measure(sides[side_name], workers, args.timeout)
                    print(f"{side_name} 1+{workers} round {round_ + 1}: {r}", file=sys.stderr)
                    results.setdefault((side_name, workers), []).append(r)
        ok = True
    finally:
        for side in sides.values():
            side.stop()  # type: ignore[attr-defined]
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work dir kept: {work}", file=sys.stderr)
    print_table(results, sizes)
    return 0


def _rate_flags(rate: str) -> list[str]:
    if not rate:
        return []
    qps, _, burst = rate.partition("/")
    return [f"--client-go-qps={float(qps):g}", f"--client-go-burst={int(burst or qps)}"]


def print_table(results: dict[tuple[str, int], list[dict[str, float]]], sizes: list[int]) -> None:
    print("| operator | pods | apply -> all pods exist (s) | apply -> all Running (s) "
          "| apply -> job Running (s) | job Running after all exist (s) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for workers in sizes:
        for side in ("trainop", "kubeflow"):
            for r in results.get((side, workers), []):
                print(f"| {side} | 1+{workers} | {r['all_exist']:.2f} | {r['all_running']:.2f} | "
                      f"{r['condition']:.2f} | {r['condition_after_exist']:.2f} |")  # fmt: skip
    print()
    print("| pods | Kubeflow / trainop, all pods exist | Kubeflow / trainop, job Running |")
    print("| --- | --- | --- |")
    for workers in sizes:
        ours, theirs = results.get(("trainop", workers)), results.get(("kubeflow", workers))
        if not ours or not theirs:
            continue

        def ratio(key: str, a: list[dict[str, Any]] = ours, b: list[dict[str, Any]] = theirs) -> float:
            return statistics.median(r[key] for r in b) / statistics.median(r[key] for r in a)

        print(f"| 1+{workers} | {ratio('all_exist'):.1f}x | {ratio('condition'):.1f}x |")
    print(f"(Kubeflow at its defaults: {KUBEFLOW_DEFAULTS}; ours with the chart's Metacontroller flags; "
          "kube-scheduler at its defaults on both; one 2-core machine runs both)")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
