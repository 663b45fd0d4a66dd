"""Many jobs at once on the e2e stack: builders, the run itself and what it measured.

Shared by test_e2e_load.py (a CI-sized run that asserts correctness only) and bench/load_bench.py (the
200-job and 1000-replica runs, printed as a table). Every figure comes from outside our code: the
apiserver's audit log (child writes), Metacontroller's log (failed syncs), the hook server's request
log (sync calls) and /proc (hook server CPU and memory); see observe.py.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from observe import (
    AuditLog,
    HookLog,
    MetacontrollerLog,
    Write,
    audit_log_path,
    child_writes,
    extra_child_writes,
    log_size,
    process_stats,
)
from trainop_stack import KINDS, TrainopStack, job, kwok_annotations, replica

MIXED_KINDS = ("PyTorchJob", "TFJob", "XGBoostJob", "JAXJob")
# 1 + N replicas per kind: the "1" is the type that decides success (JAX has only Workers).
_TYPES = {"PyTorchJob": ("Master", "Worker"), "TFJob": ("PS", "Worker"),
          "XGBoostJob": ("Master", "Worker"), "JAXJob": (None, "Worker")}  # fmt: skip


def load_job(kind: str, name: str, workers: int, run_for: str) -> dict[str, Any]:
    """A ``kind`` job with 1 + ``workers`` pods that kwok runs for ``run_for``, then Succeeded."""
    ann = kwok_annotations(run_for=run_for)
    first, rest = _TYPES[kind]
    specs = {rest: replica(kind, replicas=workers + (first is None), annotations=ann)}
    if first:
        specs = {first: replica(kind, annotations=ann), **specs}
    return job(kind, name, specs)


def mixed_jobs(
    count: int, workers: int, run_for: str, kinds: tuple[str, ...] = MIXED_KINDS
) -> list[dict[str, Any]]:
    """``count`` jobs cycling through ``kinds``, named ``<kind>-<i>``."""
    return [load_job(kinds[i % len(kinds)], f"{kinds[i % len(kinds)].lower()}-{i}", workers, run_for)
            for i in range(count)]  # fmt: skip


@dataclass
class LoadRun:
    namespace: str
    jobs: int
    pods: int
    apply_seconds: float  # kubectl apply of the whole list (one create per job, through both webhooks)
    seconds_to_all_succeeded: float  # from the start of the apply
    succeeded: set[str]
    seen_running: set[str]
    hook_calls: Counter[str]  # per job, from apply to the end of the window
    calls_after_finish: Counter[str]  # per job, in the window after every job finished and things settled
    failed_syncs: list[str]  # Metacontroller log lines
    writes: list[Write]  # Metacontroller's successful writes in the namespace (audit log)
    hook_cpu_seconds: float
    hook_peak_rss: dict[int, int] = field(default_factory=dict)  # per pid, sampled while waiting

    @property
    def child_writes(self) -> Counter[str]:
        return child_writes(self.writes)

    @property
    def extra_child_writes(self) -> list[Write]:
        return extra_child_writes(self.writes)


def _job_states(stack: TrainopStack, namespace: str, kinds: tuple[str, ...]) -> dict[str, set[str]]:
    """Job name -> types of its True conditions."""
    plurals = ",".join(KINDS[k]["plural"] for k in kinds)
    items = json.loads(stack.kubectl("get", plurals, "-n", namespace, "-o", "json", timeout=120).stdout)[
        "items"
    ]
    return {
        i["metadata"]["name"]: {
            c["type"] for c in (i.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
        }
        for i in items
    }


def run_load(
    stack: TrainopStack,
    jobs: list[dict[str, Any]],
    *,
    timeout: float,
    quiet_seconds: float = 5.0,
    window_seconds: float = 10.0,
    poll: float = 1.0,
) -> LoadRun:
    """Apply ``jobs`` with one ``kubectl apply`` in a new namespace and wait until all are Succeeded.

    Then wait until no hook call arrived for ``quiet_seconds`` (the last child events and the echo of
    the final status write), and count the calls of the following ``window_seconds``: a job that keeps
    being synced after it finished (a hot loop, a needless wake-up) shows up there.
    """
    namespace = f"load-{uuid.uuid4().hex[:6]}"
    stack.cp.create_namespace(namespace)
    hooks, mc = stack.process("hooks"), stack.process("metacontroller")
    hook_log, mc_log, audit = (
        HookLog(hooks.log_path),
        MetacontrollerLog(mc.log_path),
        AuditLog(audit_log_path(stack.cp)),
    )
    hook_from, mc_from, audit_from = log_size(hooks.log_path), log_size(mc.log_path), log_size(audit.path)
    cpu_before = process_stats(hooks.pid).cpu_seconds
    kinds = tuple(sorted({j["kind"] for j in jobs}))
    names = {j["metadata"]["name"] for j in jobs}
    pods = sum(
        sum(int(r.get("replicas", 1)) for r in j["spec"][KINDS[j["kind"]]["field"]].values()) for j in jobs
    )
    peak: dict[int, int] = {}
    seen_running: set[str] = set()

    t0 = time.monotonic()
    stack.kubectl("apply", "-n", namespace, "-o", "name", "-f", "-", timeout=600,
                  input=json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs}))  # fmt: skip
    applied = time.monotonic() - t0
    deadline = t0 + timeout
    while True:
        states = _job_states(stack, namespace, kinds)
        seen_running |= {n for n, s in states.items() if "Running" in s}
        for pid, rss in process_stats(hooks.pid).rss_bytes.items():
            peak[pid] = max(peak.get(pid, 0), rss)
        failed = sorted(n for n, s in states.items() if "Failed" in s)
        if failed:
            raise AssertionError(f"jobs failed under load: {failed[:10]}")
        done = {n for n, s in states.items() if "Succeeded" in s}
        if done >= names:
            break
        if time.monotonic() > deadline:
            missing = sorted(names - done)[:10]
            raise AssertionError(
                f"{len(done)}/{len(names)} Succeeded after {timeout:.0f}s; not yet: {missing}"
            )
        time.sleep(poll)
    elapsed = time.monotonic() - t0

    settled = _wait_quiet(
        hook_log, namespace, hook_from, quiet_seconds, timeout=max(60.0, window_seconds * 6)
    )
    time.sleep(window_seconds)
    after = hook_log.calls(namespace, settled)
    return LoadRun(
        namespace=namespace,
        jobs=len(jobs),
        pods=pods,
        apply_seconds=applied,
        seconds_to_all_succeeded=elapsed,
        succeeded=done,
        seen_running=seen_running,
        hook_calls=hook_log.calls(namespace, hook_from),
        calls_after_finish=after,
        failed_syncs=mc_log.failed_syncs(namespace, mc_from),
        writes=audit.writes(namespace, offset=audit_from),
        hook_cpu_seconds=process_stats(hooks.pid).cpu_seconds - cpu_before,
        hook_peak_rss=peak,
    )


def _wait_quiet(log: HookLog, namespace: str, offset: int, quiet: float, timeout: float) -> int:
    """The hook log's size once ``namespace`` had no hook call for ``quiet`` seconds (or at ``timeout``:
    a job synced without end never goes quiet, and the caller's window then counts its calls)."""
    deadline = time.monotonic() + timeout
    size = log_size(log.path)
    last_total, last_change = sum(log.calls(namespace, offset).values()), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        size = log_size(log.path)  # before counting: a call logged meanwhile falls into the window
        total = sum(log.calls(namespace, offset).values())
        if total != last_total:
            last_total, last_change = total, time.monotonic()
        elif time.monotonic() - last_change >= quiet:
            break
    return size
