"""Where a job's fan-out time goes: our stack's writes against the control plane's own floor, in one run.

    python bench/fanout_breakdown.py [--workers 100] [--rounds 2] [--concurrency 8]

Brings up the e2e stack of tests/e2e (webhooks and hooks under gunicorn, the real Metacontroller with the
chart's flags) with an apiserver audit log, and per round:

1. applies a 1 Master + N Workers PyTorchJob (kwok pods stay Running) and reads from the audit log, in
   seconds from the job's create: Metacontroller's first and last Pod and Service create, the mean gap
   between two of its creates next to the apiserver's own mean latency for one, and the status writes;
   from the hook server's log, its sync calls and their latency;
2. creates the same N+1 Pods and N+1 Services (as the apiserver returned the job's, renamed, without
   owner) with one client, one request after another, as Metacontroller writes one parent's children:
   the floor of serial creates on this machine, downstream reactions (scheduler, kwok, controllers) alike;
3. the same with ``--concurrency`` clients at once: what concurrent child writes would give.

A benchmark, not an assert: it prints one table per round. bench/README.md#fan-out-beside-kubeflow reads
the figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import shutil
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from controlplane import ControlPlane, chart_metacontroller_args, default_bin_dir
from fanout_vs_kubeflow import measure, roomy_node
from observe import enable_audit
from trainop_stack import TrainopStack, ensure_binaries

METACONTROLLER = "metacontroller/"
# Server-set fields a create must not carry.
SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "ownerReferences",
    "generation",
)


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def audit_events(log: Path, offset: int, namespace: str) -> list[dict[str, Any]]:
    out = []
    with log.open() as f:
        f.seek(offset)
        for line in f:
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if event.get("stage") == "ResponseComplete" and ref.get("namespace") == namespace:
                out.append(event)
    return out


def writes(
    events: list[dict[str, Any]], verb: str, resource: str, subresource: str = ""
) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e["verb"] == verb
        and e["objectRef"].get("resource") == resource
        and e["objectRef"].get("subresource", "") == subresource
        and e.get("userAgent", "").startswith(METACONTROLLER)
        and 200 <= (e.get("responseStatus") or {}).get("code", 0) < 300
    ]


def span(events: list[dict[str, Any]], t0: float) -> dict[str, float]:
    """First and last request (seconds after t0), mean gap between two and mean server latency of one."""
    starts = sorted(stamp(e["requestReceivedTimestamp"]) for e in events)
    latency = sum(stamp(e["stageTimestamp"]) - stamp(e["requestReceivedTimestamp"]) for e in events)
    return {
        "n": len(events),
        "first": starts[0] - t0,
        "last": starts[-1] - t0,
        "gap_ms": 1000 * (starts[-1] - starts[0]) / max(1, len(starts) - 1),
        "latency_ms": 1000 * latency / len(events),
    }


class Client:
    def __init__(self, cp: ControlPlane) -> None:
        self.conn = http.client.HTTPSConnection(
            "127.0.0.1", cp.api_port, context=cp.client_ssl_context(), timeout=30
        )

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        self.conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        payload = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {payload[:300]!r}")
        return json.loads(payload)


def copies(cp: ControlPlane, namespace: str, target: str) -> list[tuple[str, dict[str, Any]]]:
    """The job's Pods and Services as the apiserver returned them, ready to create in ``target``."""
    client = Client(cp)
    out: list[tuple[str, dict[str, Any]]] = []
    for plural in ("pods", "services"):
        for item in client.call("GET", f"/api/v1/namespaces/{namespace}/{plural}")["items"]:
            meta = item["metadata"]
            for field in SERVER_FIELDS:
                meta.pop(field, None)
            meta["namespace"] = target
            item.pop("status", None)
            if plural == "pods":
                item["spec"].pop("nodeName", None)
            else:
                item["spec"].pop("clusterIPs", None)
                if item["spec"].get("clusterIP") != "None":
                    item["spec"].pop("clusterIP", None)
            out.append((plural, item))
    return out


def create_all(cp: ControlPlane, objects: list[tuple[str, dict[str, Any]]], concurrency: int) -> float:
    namespace = objects[0][1]["metadata"]["namespace"]
    pods = [o for o in objects if o[0] == "pods"]
    services = [o for o in objects if o[0] == "services"]
    clients = [Client(cp) for _ in range(concurrency)]

    def write(client: Client, chunk: list[tuple[str, dict[str, Any]]]) -> None:
        for plural, obj in chunk:
            client.call("POST", f"/api/v1/namespaces/{namespace}/{plural}", obj)

    def run(batch: list[tuple[str, dict[str, Any]]]) -> None:
        chunks = [batch[i::concurrency] for i in range(concurrency)]
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(write, clients, chunks))

    t0 = time.monotonic()
    run(pods)  # Pods first, as Metacontroller orders kinds
    run(services)
    return time.monotonic() - t0


def delete_namespace(cp: ControlPlane, namespace: str) -> None:
    cp.kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=300s", check=False, timeout=320)


def hook_syncs(hooks_log: Path, offset: int, namespace: str) -> list[float]:
    out = []
    with hooks_log.open() as f:
        f.seek(offset)
        for line in f:
            if line.startswith("{") and f'"namespace": "{namespace}"' in line:
                entry = json.loads(line)
                if entry.get("path") == "/sync":
                    out.append(float(entry["latency_ms"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--workers", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    bin_dir = default_bin_dir()
    work = Path(tempfile.mkdtemp(prefix="fanout-breakdown-"))
    ensure_binaries(bin_dir, work / "build-control-plane.log")
    stack = TrainopStack(work / "trainop", bin_dir, metacontroller_args=chart_metacontroller_args())
    log = enable_audit(stack.cp)
    # Batch mode: the audit log records each request's own timestamps without adding a disk write to it.
    stack.cp.apiserver_args = [
        "--audit-log-mode=batch" if a == "--audit-log-mode=blocking" else a for a in stack.cp.apiserver_args
    ]
    hooks_log = stack.work_dir / "hooks.log"
    try:
        stack.start()
        roomy_node(stack.cp, "roomy", 3 * (args.workers + 1) + 10)
        for round_ in range(1, args.rounds + 1):
            offset, hooks_offset = log.stat().st_size, hooks_log.stat().st_size
            seen = measure(stack, args.workers, args.timeout, keep=True)
            namespace = seen["namespace"]
            time.sleep(2)  # the batch audit backend flushes every second
            events = audit_events(log, offset, namespace)
            created = [
                e for e in events if e["verb"] == "create" and e["objectRef"]["resource"] == "pytorchjobs"
            ]
            t0 = stamp(created[0]["requestReceivedTimestamp"])
            rows = {
                "Metacontroller: Pod creates": span(writes(events, "create", "pods"), t0),
                "Metacontroller: Service creates": span(writes(events, "create", "services"), t0),
                "Metacontroller: status writes": span(writes(events, "update", "pytorchjobs", "status"), t0),
            }
            syncs = hook_syncs(hooks_log, hooks_offset, namespace)
            floor: dict[int, float] = {}
            for concurrency in (1, args.concurrency):
                target = f"floor-{uuid.uuid4().hex[:6]}"
                stack.cp.create_namespace(target)
                floor[concurrency] = create_all(stack.cp, copies(stack.cp, namespace, target), concurrency)
                delete_namespace(stack.cp, target)
            delete_namespace(stack.cp, namespace)
            total = args.workers + 1
            print(f"\nround {round_}: 1 + {args.workers} PyTorchJob, seconds from the job's create")
            print(f"  apply -> all pods exist {seen['all_exist']:.2f}, job Running {seen['condition']:.2f}")
            print(f"  {'writes':34} {'n':>5} {'first':>7} {'last':>7} {'gap ms':>7} {'server ms':>9}")
            for label, row in rows.items():
                print(
                    f"  {label:34} {row['n']:5.0f} {row['first']:7.3f} {row['last']:7.3f}"
                    f" {row['gap_ms']:7.1f} {row['latency_ms']:9.1f}"
                )
            print(f"  hook /sync calls: {len(syncs)}, latency ms: {', '.join(f'{s:.0f}' for s in syncs)}")
            for concurrency, seconds in floor.items():
                print(
                    f"  the same {2 * total} creates by {concurrency} client(s) at once: {seconds:.2f} s"
                    f" ({1000 * seconds / (2 * total):.1f} ms per create)"
                )
        return 0
    finally:
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
