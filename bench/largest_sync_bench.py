"""The resync of the largest job of every kind that admission accepts, with every child observed as the
apiserver returns them, through the hook's WSGI app; and a hostile body of the same size.

    python bench/largest_sync_bench.py [--kinds TFJob,MXJob]

The jobs and bodies are tests/largest_jobs.py's (realistic template; every pod Running with
managedFields, conditions and containerStatuses as the apiserver writes them). Each case runs in a fresh
process that reads the body from a file, notes its resident size, posts it through flask's test client
with the default settings (those the chart ships) and reports the status, the time and the peak resident
size (VmHWM) above that baseline. Estimates are trainop.jsoncost's; the allowance is hooks.bodycost's.
Targets (bench/README.md#largest-jobs): 200 for every kind within the 10 s hook timeout, peak under the
worker's share of the chart's 3Gi hook pod (1.5 GiB); the hostile bodies 413. Never asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MIB = 1024 * 1024
TIMEOUT = 10.0
WORKER_SHARE = 1536 * MIB


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def run_case(body_file: str) -> None:
    """In the child: one /sync through the app; prints a JSON line."""
    import logging

    logging.disable(logging.CRITICAL)
    from hooks.app import create_app

    client = create_app(clock=lambda: NOW).test_client()
    data = Path(body_file).read_bytes()
    base = _status_kib("VmRSS")
    started = time.perf_counter()
    response = client.post("/sync", data=data, content_type="application/json")
    elapsed = time.perf_counter() - started
    answer = json.loads(response.get_data())
    if response.status_code == 200:
        running = any(c["type"] == "Running" for c in answer["status"].get("conditions", []))
        summary = f"{len(answer['children'])} children" + (", Running" if running else "")
    else:
        summary = answer.get("error", "")[:70]
    peak = (_status_kib("VmHWM") - base) * 1024
    print(json.dumps({"status": response.status_code, "peak": peak, "seconds": elapsed, "summary": summary}))


def measure(body: bytes) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(body)
        f.flush()
        out = subprocess.run([sys.executable, __file__, "--case", f.name], capture_output=True, text=True)
    if out.returncode != 0:
        return {"status": "died", "peak": 0, "seconds": float("nan"), "summary": out.stderr[-70:]}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    from hooks.bodycost import children_allowance
    from hooks.settings import MAX_INFLIGHT
    from tests.largest_jobs import LEADERS, largest_job, most_workers, realistic_job, resync_body
    from trainop.jsoncost import leading_member, parse_cost

    parser = argparse.ArgumentParser()
    parser.add_argument("--kinds", default=",".join(sorted(LEADERS)))
    args = parser.parse_args()
    budget = MAX_INFLIGHT.default
    share = WORKER_SHARE / MIB
    print(f"parse budget {budget / MIB:.0f} MiB; hook timeout {TIMEOUT:.0f} s; worker share {share:.0f} MiB")
    print()
    print(
        "| kind | largest admissible | body MiB | estimate MiB (/ budget) | allowance MiB | status "
        "| s (/ 10 s) | peak MiB (/ share) | answer |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    hostile_rows = []
    for kind in args.kinds.split(","):
        workers = most_workers(kind)
        parent = largest_job(kind)
        body = resync_body(parent, NOW)
        cost = parse_cost(body)
        allowance = children_allowance(json.loads(body)["parent"])
        result = measure(body)
        shape = " + ".join([f"1 {t}" for t in LEADERS[kind]] + [f"{workers} Workers"])
        print(
            f"| {kind} | {shape} | {len(body) / MIB:.1f} | {cost / MIB:.0f} ({cost / budget:.2f}) | "
            f"{allowance.cost / MIB:.0f} | {result['status']} | {result['seconds']:.2f} "
            f"({result['seconds'] / TIMEOUT:.2f}) | {result['peak'] / MIB:.0f} "
            f"({result['peak'] / WORKER_SHARE:.2f}) | {result['summary']} |",
            flush=True,
        )
        job_bytes = json.dumps(parent, separators=(",", ":")).encode()
        filler = (len(body) - len(job_bytes) - 40) // 3
        empty = b'{"parent":' + job_bytes + b',"children":{"Pod.v1":{"p":[' + b"[]," * filler + b"[]]}}}"
        head = leading_member(body, "parent", (), len(body))
        assert head is not None
        small = json.dumps(realistic_job(kind, max(1, workers // 10)), separators=(",", ":")).encode()
        tenfold = b'{"parent":' + small + body[head[1] :]
        del body
        for what, hostile in (
            ("same bytes of `[],`", empty),
            ("its children, job of a tenth the Workers", tenfold),
        ):
            hostile_rows.append((kind, what, len(hostile), measure(hostile)))
    print()
    print("| kind | hostile body | body MiB | status | s | peak MiB | error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, what, size, result in hostile_rows:
        print(
            f"| {kind} | {what} | {size / MIB:.1f} | {result['status']} | {result['seconds']:.2f} | "
            f"{result['peak'] / MIB:.0f} | {result['summary']} |"
        )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        run_case(sys.argv[2])
    else:
        main()
