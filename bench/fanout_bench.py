"""Fan-out on a real control plane: seconds from `kubectl apply` of a PyTorchJob to all its pods.

    python bench/fanout_bench.py [--workers 100,1000] [--profiles chart,5/10] [--keep]

Brings up the e2e stack of tests/e2e (etcd, kube-apiserver, KCM, kube-scheduler, kwok, our webhooks and
hooks under gunicorn, the real Metacontroller) once, then for each Metacontroller client-rate profile and
each size applies a PyTorchJob with 1 Master + N Workers (pods that kwok keeps Running) with kubectl in a
fresh namespace and records, from a watch on the job's pods:

* apply -> all N+1 pods exist (created by Metacontroller through the apiserver),
* apply -> all N+1 pods Running (scheduled by kube-scheduler, started by kwok).

A benchmark, not an assert: it prints one table row per profile and size. Metacontroller's client-side rate
limit decides most of the figure, so it is stated in every row: `chart` is the chart's commandArgs
(charts/trainop/values.yaml, as the e2e suite runs it), `5/10` is Metacontroller's own default
(`--client-go-qps=5 --client-go-burst=10`), any other `QPS/BURST` is passed as those flags.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))

from controlplane import chart_metacontroller_args, default_bin_dir
from load_bench import roomy_node
from trainop_stack import TrainopStack, ensure_binaries, job, replica

# kube-scheduler's KubeSchedulerConfiguration v1 defaults (the harness does not change them).
SCHEDULER_QPS = "50/100"
SETTLE_SECONDS = 5.0


class PodWatch:
    """Watches one job's pods; records when each pod first exists and first runs (monotonic seconds)."""

    def __init__(self, stack: TrainopStack, namespace: str, job_name: str) -> None:
        self.host, self.port = "127.0.0.1", stack.cp.api_port
        self.ctx = stack.cp.client_ssl_context()
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.selector = f"training.kubeflow.org/job-name={job_name}"
        self.created: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self.ready.wait(30):
            raise RuntimeError(f"pod watch did not start: {self.error}")

    def _get(self, query: dict[str, str], timeout: float) -> http.client.HTTPResponse:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        conn.request("GET", f"{self.path}?{urllib.parse.urlencode(query)}")
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"GET {self.path}: HTTP {resp.status}: {resp.read()[:300]!r}")
        return resp

    def _see(self, pod: dict[str, Any], now: float) -> None:
        name = pod["metadata"]["name"]
        self.created.setdefault(name, now)
        if (pod.get("status") or {}).get("phase") == "Running":
            self.running.setdefault(name, now)

    def _run(self) -> None:
        try:
            listing = json.loads(self._get({"labelSelector": self.selector}, 30).read())
            now = time.monotonic()
            for pod in listing["items"]:
                self._see(pod, now)
            query = {
                "labelSelector": self.selector,
                "watch": "1",
                "resourceVersion": listing["metadata"]["resourceVersion"],
                "timeoutSeconds": "600",
            }
            resp = self._get(query, 610)
            self.ready.set()
            while not self.stop.is_set():
                line = resp.readline()
                if not line:
                    return
                event = json.loads(line)
                if event["type"] in ("ADDED", "MODIFIED"):
                    self._see(event["object"], time.monotonic())
        except BaseException as e:  # reported by the caller
            self.error = e
            self.ready.set()


def fanout_job(name: str, workers: int) -> dict[str, Any]:
    # No kwok outcome annotation: pods stay Running, so "all Running" is a stable end state.
    return job(
        "PyTorchJob",
        name,
        {
            "Master": replica("PyTorchJob", restart_policy="OnFailure"),
            "Worker": replica("PyTorchJob", replicas=workers, restart_policy="OnFailure"),
        },
    )


def measure(stack: TrainopStack, workers: int, timeout: float) -> dict[str, float]:
    namespace = f"fanout-{uuid.uuid4().hex[:6]}"
    stack.cp.create_namespace(namespace)
    name = "fanout"
    total = workers + 1
    watch = PodWatch(stack, namespace, name)
    watch.start()
    manifest = json.dumps(fanout_job(name, workers))
    t0 = time.monotonic()
    stack.kubectl("apply", "-n", namespace, "-f", "-", input=manifest)
    applied = time.monotonic() - t0
    deadline = t0 + timeout
    while time.monotonic() < deadline and len(watch.running) < total:
        if watch.error is not None:
            raise RuntimeError(f"pod watch failed: {watch.error}")
        time.sleep(0.05)
    watch.stop.set()
    if len(watch.running) < total:
        raise RuntimeError(
            f"after {timeout:.0f}s: {len(watch.created)}/{total} pods exist, {len(watch.running)} Running"
        )
    created = sorted(watch.created.values())
    running = sorted(watch.running.values())
    # Gone for good before the next profile, so its controller does not spend its budget on this job.
    stack.kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=180s", check=False, timeout=200)
    return {
        "kubectl_apply": applied,
        "first_pod": created[0] - t0,
        "all_exist": created[-1] - t0,
        "all_running": running[-1] - t0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--workers", default="100,1000", help="comma list of worker counts")
    ap.add_argument(
        "--profiles",
        default="chart,5/10",
        help="comma list of Metacontroller client rates: 'chart' (the chart's flags) or QPS/BURST",
    )
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per measurement")
    ap.add_argument("--keep", action="store_true", help="keep the work dir with all component logs")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="trainop-fanout-"))
    bin_dir = default_bin_dir()
    ensure_binaries(bin_dir, work / "build-control-plane.log")
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    sizes = [int(w) for w in args.workers.split(",") if w.strip()]
    rows: list[str] = []
    ok = False
    stack = TrainopStack(work / "stack", bin_dir, metacontroller_args=_flags(profiles[0]))
    try:
        t = time.monotonic()
        stack.start()
        print(f"stack up in {time.monotonic() - t:.1f}s (work dir {work})", file=sys.stderr)
        # The harness's node holds 250 pods; the largest job must fit at once.
        roomy_node(stack, "kwok-fanout", max(sizes) + 50)
        for i, profile in enumerate(profiles):
            if i:
                stack.restart_metacontroller(_flags(profile))
            for workers in sizes:
                # Let Metacontroller's initial lists finish and its token bucket refill before timing.
                time.sleep(SETTLE_SECONDS)
                r = measure(stack, workers, args.timeout)
                print(f"{profile} 1+{workers}: {r}", file=sys.stderr)
                rows.append(
                    f"| {_describe(profile)} | 1+{workers} | {r['kubectl_apply']:.2f} | "
                    f"{r['first_pod']:.2f} | {r['all_exist']:.2f} | {r['all_running']:.2f} |"
                )
        ok = True
    finally:
        stack.stop()
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work dir kept: {work}", file=sys.stderr)
    print(
        "| Metacontroller client QPS/burst | pods | kubectl apply (s) | apply -> first pod (s) "
        "| apply -> all pods exist (s) | apply -> all Running (s) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row)
    print(
        f"(kube-scheduler client QPS/burst {SCHEDULER_QPS}, its defaults; kwok and the apiserver "
        "unthrottled; one 2-core machine runs everything)"
    )
    return 0


def _flags(profile: str) -> list[str]:
    if profile == "chart":
        return []
    qps, _, burst = profile.partition("/")
    return [f"--client-go-qps={float(qps):g}", f"--client-go-burst={int(burst or 10)}"]


def _describe(profile: str) -> str:
    if profile == "chart":
        rate = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in chart_metacontroller_args() if "=" in a}
        return f"{rate.get('--client-go-qps')}/{rate.get('--client-go-burst')} (chart)"
    return f"{profile} (Metacontroller default)" if profile == "5/10" else profile


if __name__ == "__main__":
    sys.exit(main())
