"""The largest job of every kind that admission accepts, on the real control plane with the real
Metacontroller: every pod and Service is created, every pod runs, and the job's status is written from
a sync that observed them all as the apiserver returns them, with no body refused (docs/limits.md).

tests/hooks/test_sync_at_the_bound.py proves the same bodies in-process and through gunicorn, built by
tests/apiserver_shape.py; here Metacontroller sends the children the apiserver holds. The jobs are
tests/largest_jobs.py's (the realistic template: GPUs, a data volume, env), one namespace per kind, all
applied at once on a stack of this module's own with one kwok node that fits every pod.

TFJob, XGBoostJob and MXJob are bound by the bytes their children imply (MAX_CHILDREN_BYTES), MPIJob
by the bytes of its ConfigMap (MAX_CHILD_BYTES: Metacontroller copies it into an annotation the
apiserver caps at 256 KiB), and run at that bound: 2,000-4,700 children each. The other kinds are bound
by MAX_REPLICAS (10,000 Workers, 10,001 pods and as many Services), ~60,000 objects together, which
Metacontroller's 100 writes a second cannot create within the tier's budget: they run with
CAPPED_WORKERS (500) Workers unless TRAINOP_E2E_LARGEST_FULL=1 asks for their bound too.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from observe import MetacontrollerLog, log_size, process_stats
from trainop_stack import KINDS as KIND_INFO
from trainop_stack import Namespace, TrainopStack

from hooks.bodycost import EXTRA_CHILDREN
from tests.largest_jobs import LEADERS, most_workers, realistic_job
from trainop.admission.validation import MAX_REPLICAS
from trainop.frameworks import FRAMEWORKS, KINDS

pytestmark = pytest.mark.e2e

FULL = os.environ.get("TRAINOP_E2E_LARGEST_FULL") == "1"
# Enough to run them beside the bytes-bound kinds, few enough not to slow those, the longest, down.
CAPPED_WORKERS = 500
NODE = "kwok-node-largest"
CLAIM = "imagenet"  # tests/realistic.py's data volume
# How long the fan-out may take before the module fails. Metacontroller creates one job's children one
# after the other: XGBoostJob's 3,284 took 3 s each on the loaded 2-core machine (~1,000 s for 2,657).
TIMEOUT = 7200.0 if FULL else 2400.0
POLL = 5.0


def namespace_of(kind: str) -> str:
    return f"lj-{kind.lower().removesuffix('job')}"


@dataclass(frozen=True)
class Planned:
    kind: str
    namespace: str
    workers: int
    bound: int  # the most Workers admission accepts in this namespace
    job: dict[str, Any]

    @property
    def replicas(self) -> dict[str, int]:
        return {**dict.fromkeys(LEADERS[self.kind], 1), "Worker": self.workers}

    @property
    def pods(self) -> int:
        return sum(self.replicas.values())

    @property
    def services(self) -> int:
        return self.pods if FRAMEWORKS[self.kind].has_services else 0


def plan(kind: str) -> Planned:
    ns = namespace_of(kind)
    bound = most_workers(kind, ns)
    workers = bound if FULL or bound < MAX_REPLICAS else CAPPED_WORKERS
    return Planned(kind, ns, workers, bound, realistic_job(kind, workers, ns))


@dataclass
class KindRun:
    pods_seen: int = 0
    running: int = 0
    services_seen: int = 0
    status: dict[str, Any] = field(default_factory=dict)
    seconds_to_children: float | None = None  # apply -> every pod and Service exists
    seconds_to_running: float | None = None  # apply -> every pod Running
    seconds_to_status: float | None = None  # apply -> the status counts every pod active, Running True


@dataclass
class HookCall:
    code: int
    observed: int
    latency_ms: float


@dataclass
class Run:
    plans: dict[str, Planned]
    kinds: dict[str, KindRun]
    seconds: float
    hook_calls: dict[str, list[HookCall]]  # per namespace: the 200 syncs of its job
    refusals: list[dict[str, Any]]  # every non-200 line of the hook log during the run
    failed_syncs: list[str]
    hook_peak_rss: int
    # /sync answers by HTTP status from the hook's own counter: it also counts the 413 of a body over
    # the server's byte limit, which is answered before any line is logged.
    sync_codes: Counter[str]


def roomy_node(stack: TrainopStack, pods: int) -> None:
    """A kwok node that fits every pod of the realistic template at once (8 CPUs, 64Gi, 8 GPUs each)."""
    stack.cp.create_node(NODE, pods=pods)
    room = {
        "cpu": str(8 * pods),
        "memory": f"{64 * pods}Gi",
        "nvidia.com/gpu": str(8 * pods),
        "ephemeral-storage": f"{8 * pods}Gi",
        "pods": str(pods),
    }
    status = {"status": {"capacity": room, "allocatable": room}}  # kwok's node stage keeps what it finds
    stack.kubectl("patch", "node", NODE, "--subresource=status", "--type=merge", "-p", json.dumps(status))


def data_volume(stack: TrainopStack, namespace: str) -> None:
    """The template's `imagenet` claim, bound to a volume of its own: an unbound claim keeps pods Pending."""
    pv = f"{namespace}-{CLAIM}"
    objects = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Ti"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "hostPath": {"path": "/data/imagenet"},
                "claimRef": {"namespace": namespace, "name": CLAIM},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": CLAIM, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Ti"}},
            },
        },
    ]
    stack.cp.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    Namespace(stack, namespace).wait_until(
        f"pvc/{CLAIM} Bound in {namespace}",
        lambda: (
            stack.kubectl("get", "pvc", CLAIM, "-n", namespace, "-o", "jsonpath={.status.phase}").stdout
            == "Bound"
        ),
        timeout=60,
    )


def table(stack: TrainopStack, resource: str) -> list[list[str]]:
    """Rows of the apiserver's own table for `resource` in every namespace (names and columns only:
    full objects of this many children would be hundreds of MiB a poll)."""
    out = stack.kubectl("get", resource, "-A", "--no-headers", "--chunk-size=2000", timeout=300).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def jobs_status(stack: TrainopStack) -> dict[str, dict[str, Any]]:
    plurals = ",".join(KIND_INFO[k]["plural"] for k in sorted(KINDS))
    items = json.loads(stack.kubectl("get", plurals, "-A", "-o", "json", timeout=120).stdout)["items"]
    return {i["metadata"]["namespace"]: i.get("status") or {} for i in items}


def status_complete(planned: Planned, status: dict[str, Any]) -> bool:
    counts = status.get("replicaStatuses") or {}
    active = {t: int((counts.get(t) or {}).get("active") or 0) for t in planned.replicas}
    return active == planned.replicas and running_condition(status)


def running_condition(status: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Running" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def sync_codes(stack: TrainopStack) -> Counter[str]:
    url = f"http://127.0.0.1:{stack.hook_metrics_port}/metrics"
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=30) as r:
        text = r.read().decode()
    out: Counter[str] = Counter()
    for m in re.finditer(r"^trainop_hook_requests_total\{([^}]*)\} ([0-9.e+]+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("hook") == "sync":
            out[labels["code"]] += int(float(m.group(2)))
    return out


def hook_lines(path: Path, offset: int) -> list[dict[str, Any]]:
    out = []
    with path.open("rb") as fh:
        fh.seek(offset)
        for raw in fh:
            if raw.startswith(b"{"):
                try:
                    entry = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(entry, dict) and "path" in entry:
                    out.append(entry)
    return out


@pytest.fixture(scope="module")
def largest_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainopStack]:
    with TrainopStack(tmp_path_factory.mktemp("e2e-largest")) as stack:
        yield stack.start()


@pytest.fixture(scope="module")
def run(largest_stack: TrainopStack) -> Run:
    stack = largest_stack
    plans = {kind: plan(kind) for kind in sorted(KINDS)}
    roomy_node(stack, sum(p.pods for p in plans.values()) + 100)
    for p in plans.values():
        stack.cp.create_namespace(p.namespace)
        data_volume(stack, p.namespace)
    hooks, mc = stack.process("hooks"), stack.process("metacontroller")
    hook_from, mc_from = log_size(hooks.log_path), log_size(mc.log_path)
    codes_before = sync_codes(stack)
    by_ns = {p.namespace: p for p in plans.values()}
    kinds = {kind: KindRun() for kind in plans}
    peak = 0

    t0 = time.monotonic()
    for p in sorted(plans.values(), key=lambda p: -p.pods):  # the longest fan-out first
        Namespace(stack, p.namespace).apply(p.job)
    while True:
        now = time.monotonic() - t0
        pods: Counter[str] = Counter()
        running: Counter[str] = Counter()
        for row in table(stack, "pods"):
            if row[0] in by_ns:
                pods[row[0]] += 1
                running[row[0]] += row[3] == "Running"
        services = Counter(row[0] for row in table(stack, "services") if row[0] in by_ns)
        statuses = jobs_status(stack)
        peak = max(peak, process_stats(hooks.pid).max_rss)
        for ns, p in by_ns.items():
            k = kinds[p.kind]
            k.pods_seen, k.running, k.services_seen = pods[ns], running[ns], services[ns]
            k.status = statuses.get(ns, {})
            if k.seconds_to_children is None and (pods[ns], services[ns]) == (p.pods, p.services):
                k.seconds_to_children = now
            if k.seconds_to_running is None and running[ns] == p.pods:
                k.seconds_to_running = now
            children = k.seconds_to_children is not None
            if k.seconds_to_status is None and children and status_complete(p, k.status):
                k.seconds_to_status = now
        if all(k.seconds_to_status is not None for k in kinds.values()) or now > TIMEOUT:
            break
        time.sleep(POLL)
    elapsed = time.monotonic() - t0

    calls: dict[str, list[HookCall]] = {ns: [] for ns in by_ns}
    refusals = []
    for entry in hook_lines(hooks.log_path, hook_from):
        if "code" in entry:
            refusals.append(entry)
        elif entry.get("path") == "/sync" and entry.get("namespace") in calls:
            calls[entry["namespace"]].append(
                HookCall(200, int(entry["observed"]), float(entry["latency_ms"]))
            )
    result = Run(
        plans=plans,
        kinds=kinds,
        seconds=elapsed,
        hook_calls=calls,
        refusals=refusals,
        failed_syncs=MetacontrollerLog(mc.log_path).failed_syncs(offset=mc_from),
        hook_peak_rss=peak,
        sync_codes=sync_codes(stack) - codes_before,
    )
    report(result, stack.work_dir / "largest-figures.json")
    return result


def report(run: Run, path: Path) -> None:
    """The run's figures, for the module's log and for bench/README.md."""
    rows = {}
    for kind, p in run.plans.items():
        k, calls = run.kinds[kind], run.hook_calls[p.namespace]
        full = [c for c in calls if c.observed >= p.pods + p.services]
        rows[kind] = {
            "workers": p.workers,
            "bound": p.bound,
            "pods": p.pods,
            "services": p.services,
            "s_to_children": k.seconds_to_children,
            "s_to_running": k.seconds_to_running,
            "s_to_status": k.seconds_to_status,
            "syncs": len(calls),
            "max_observed": max((c.observed for c in calls), default=0),
            "full_syncs": len(full),
            "full_sync_ms_max": max((c.latency_ms for c in full), default=None),
            "sync_ms_max": max((c.latency_ms for c in calls), default=None),
        }
    figures = {
        "seconds": round(run.seconds, 1),
        "hook_peak_rss_mib": run.hook_peak_rss >> 20,
        "refusals": len(run.refusals),
        "sync_codes": dict(run.sync_codes),
        "failed_syncs": len(run.failed_syncs),
        "kinds": rows,
    }
    path.write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures, indent=1))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_pod_and_service_of_the_largest_job_is_created_and_every_pod_runs(kind: str, run: Run) -> None:
    p, k = run.plans[kind], run.kinds[kind]
    assert (k.pods_seen, k.running, k.services_seen) == (p.pods, p.pods, p.services)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_largest_jobs_status_counts_every_pod_active_and_running(kind: str, run: Run) -> None:
    p, k = run.plans[kind], run.kinds[kind]
    counts = {t: (k.status.get("replicaStatuses") or {}).get(t, {}).get("active") for t in p.replicas}
    assert counts == p.replicas, k.status.get("replicaStatuses")
    assert running_condition(k.status), k.status.get("conditions")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_hook_answered_a_sync_that_observed_every_child(kind: str, run: Run) -> None:
    p = run.plans[kind]
    most = max((c.observed for c in run.hook_calls[p.namespace]), default=0)
    # Pods and Services, and the kind's few others (MPI's ConfigMap and RBAC).
    assert p.pods + p.services <= most <= p.pods + p.services + EXTRA_CHILDREN


def test_the_hook_refused_no_body_and_metacontroller_failed_no_sync(run: Run) -> None:
    # A 429 is the parse budget's "not now" to a body that fits it alone (two of these jobs' bodies do
    # not fit one worker's budget together), which Metacontroller retries after its Retry-After.
    assert [r for r in run.refusals if r["code"] != 429] == []
    assert set(run.sync_codes) <= {"200", "429"}, run.sync_codes
    assert run.failed_syncs == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_one_worker_more_than_the_bound_is_denied_by_the_webhook(
    kind: str, run: Run, largest_stack: TrainopStack
) -> None:
    p = run.plans[kind]
    over = realistic_job(kind, p.bound + 1, p.namespace)
    # Beside the running job; as long a name, since the name is in every address and so moves the bound.
    over["metadata"]["name"] = "o" * len(p.job["metadata"]["name"])
    res = Namespace(largest_stack, p.namespace).kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(over), check=False
    )
    assert res.returncode != 0
    assert "[Worker].replicas" in res.stderr and "at most" in res.stderr, res.stderr
