"""Peak memory of the largest jobs and bodies the servers admit, and of the hostile ones they now refuse.

    python bench/bounds_bench.py [--before DIR] [--skip-huge]

Two tables. **Jobs**: the largest admissible TFJob (the realistic template of tests/realistic.py, as the
benches run it) and XGBoostJob and MXJob, and the 5000-Worker attack jobs: the first sync (no children
yet) and, for the TFJob, its resync with every pod Running. **Bodies**: the issue's hostile bodies (an
8 MiB AdmissionReview carrying `pad: [[],...]`, 16 MiB and 128 MiB `/sync` bodies of `[[],...]`) and
the densest bodies still admitted at each body limit, on /mutate, /validate and /sync.

Each case runs in a fresh process: it reads the body from a file, notes its resident size, sends the body
through the server's WSGI app (flask's test client: what gunicorn hands a worker), and reports the peak
resident size (VmHWM) above that baseline, the status and the latency. `--before DIR` runs every case
against another source tree as well (e.g. `git archive <commit> | tar -x -C DIR`), for a before/after
table; `--skip-huge` leaves out the cases that take more than ~2 GiB before the bounds.
Targets (bench/README.md#targets): no admissible request takes a hook worker past 768 MiB or a webhook
worker past 256 MiB (their shares of the chart's pod limits). Never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
MIB = 1024 * 1024


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def run_case(route: str, body_file: str) -> None:
    """In the child: one request through the app of the tree first on sys.path; prints a JSON line."""
    import logging

    logging.disable(logging.CRITICAL)
    if route == "/sync":
        from hooks.app import create_app

        app = create_app(clock=lambda: NOW)
    else:
        from webhooks.app import create_app as create_webhook_app

        app = create_webhook_app()
    client = app.test_client()
    data = Path(body_file).read_bytes()
    base = _status_kib("VmRSS")
    started = time.perf_counter()
    response = client.post(route, data=data, content_type="application/json")
    elapsed = time.perf_counter() - started
    answer = response.get_data()
    summary = ""
    if response.status_code == 200 and route == "/sync":
        parsed = json.loads(answer)
        failed = [c for c in parsed["status"].get("conditions", []) if c.get("type") == "Failed"]
        summary = failed[0]["reason"] if failed else f"{len(parsed['children'])} children"
    elif response.status_code == 200:
        summary = "allowed" if json.loads(answer)["response"]["allowed"] else "denied"
    else:
        summary = json.loads(answer).get("error", "")[:60]
    print(
        json.dumps(
            {
                "status": response.status_code,
                "peak_mib": (_status_kib("VmHWM") - base) / 1024,
                "seconds": elapsed,
                "answer_mib": len(answer) / MIB,
                "summary": summary,
            }
        )
    )


def measure(tree: Path, route: str, body: bytes) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        f.write(body)
        f.flush()
        env = {**os.environ, "PYTHONPATH": str(tree)}
        out = subprocess.run(
            [sys.executable, __file__, "--case", route, f.name], env=env, capture_output=True, text=True
        )
    if out.returncode != 0:
        return {"status": "died", "peak_mib": float("nan"), "seconds": float("nan"), "answer_mib": 0,
                "summary": (out.stderr.strip().splitlines() or ["?"])[-1][:60]}  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# ---- the cases ------------------------------------------------------------------------------------


def _largest_admissible(make: Any) -> int:
    from trainop.admission.admit import admit

    lo, hi = 1, 10_000
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if admit(make(mid)).checks.ok else (lo, mid)
    return lo


def sync_body(parent: Any, children: Any = None) -> bytes:
    return json.dumps({"parent": parent, "children": children or {}}, separators=(",", ":")).encode()


def job_cases() -> list[tuple[str, str, bytes, str]]:
    """(case, route, body, what validation says of one replica more)."""
    import orjson

    from tests.builders import job
    from tests.realistic import resync_request, training_job
    from trainop.admission.admit import admit

    cases: list[tuple[str, str, bytes, str]] = []

    def denial(obj: Any) -> str:
        return admit(obj).checks.message[:140]

    tf = _largest_admissible(lambda n: training_job("TFJob", n))
    cases.append((f"TFJob 1+{tf - 1} (largest admissible), first sync", "/sync",
                  sync_body(training_job("TFJob", tf)), denial(training_job("TFJob", tf + 1))))  # fmt: skip
    cases.append((f"TFJob 1+{tf - 1}, resync, all Running", "/sync", resync_request("TFJob", tf, NOW), ""))
    cases.append(
        ("TFJob 1000 (benches, load tests), resync", "/sync", resync_request("TFJob", 1000, NOW), "")
    )
    xgb = _largest_admissible(lambda n: job("XGBoostJob", name="wide", Master=1, Worker=n))
    cases.append((f"XGBoostJob 1+{xgb} (largest admissible), first sync", "/sync",
                  sync_body(job("XGBoostJob", name="wide", Master=1, Worker=xgb)),
                  denial(job("XGBoostJob", name="wide", Master=1, Worker=xgb + 1))))  # fmt: skip
    mx = _largest_admissible(lambda n: job("MXJob", name="wide", Scheduler=1, Server=1, Worker=n))
    cases.append((f"MXJob 1+1+{mx} (largest admissible), first sync", "/sync",
                  sync_body(job("MXJob", name="wide", Scheduler=1, Server=1, Worker=mx)), ""))  # fmt: skip
    cases.append(("TFJob of 5000 Workers (356 B attack), first sync", "/sync",
                  sync_body(job("TFJob", name="wide", Worker=5000)), ""))  # fmt: skip
    cases.append(("XGBoostJob 1+5000, first sync", "/sync",
                  sync_body(job("XGBoostJob", name="wide", Master=1, Worker=5000)), ""))  # fmt: skip
    del orjson
    return cases


def _review(obj: Any, pad: bytes) -> bytes:
    from tests.builders import admission_review

    review = json.dumps(admission_review(obj), separators=(",", ":")).encode()
    return review.replace(b'"object":{', b'"object":{"pad":' + pad + b",", 1)


def _pad(unit: bytes, size: int) -> bytes:
    return b"[" + unit * max(0, size // len(unit) - 1) + b"[]]"


# The densest padding still admitted: 31 bytes estimated at 8x their size (trainop.jsoncost).
DENSEST = b'[],"' + b"x" * 25 + b'",'


def body_cases(skip_huge: bool) -> list[tuple[str, str, bytes, str]]:
    from tests.builders import admission_review, job
    from tests.realistic import resync_request
    from trainop.jsoncost import MAX_COST_PER_BYTE

    small = job("TFJob", name="pad", Worker=1)
    webhook_limit = 8 * MIB - 4096
    cases = []
    for route in ("/mutate", "/validate"):
        cases.append(
            (f"{route} 8 MiB review, pad [[],...]", route, _review(small, _pad(b"[],", webhook_limit)), "")
        )
        cases.append((f"{route} 8 MiB review, densest admitted pad", route,
                      _review(small, _pad(DENSEST, webhook_limit)), ""))  # fmt: skip
    # Inside the pod template, which defaulting copies a path of and the patch diffs.
    review = json.dumps(admission_review(small), separators=(",", ":")).encode()
    pad = b'"pad":' + _pad(DENSEST, webhook_limit) + b","
    in_template = review.replace(b'"template":{', b'"template":{' + pad, 1)
    cases.append(("/mutate 8 MiB review, densest pad in the pod template", "/mutate", in_template, ""))
    cases.append(("/sync 16 MiB [[],...]", "/sync", b'{"parent":' + _pad(b"[],", 16 * MIB) + b"}", ""))
    if not skip_huge:
        cases.append(
            ("/sync 128 MiB [[],...]", "/sync", b'{"parent":' + _pad(b"[],", 128 * MIB - MIB) + b"}", "")
        )
    # The densest body the hook admits is bounded by its whole budget (640 MiB estimated): 80 MiB.
    dense = 640 * MIB // MAX_COST_PER_BYTE - MIB
    parent = json.dumps(small, separators=(",", ":")).encode()
    padded = parent.replace(b'"spec":{', b'"pad":' + _pad(DENSEST, dense) + b',"spec":{', 1)
    cases.append((f"/sync {dense // MIB} MiB job with densest admitted pad", "/sync",
                  b'{"parent":' + padded + b',"children":{}}', ""))  # fmt: skip
    cases.append(
        ("/sync PyTorchJob 1000 resync (realistic)", "/sync", resync_request("PyTorchJob", 1000, NOW), "")
    )
    return cases


def table(title: str, cases: list[tuple[str, str, bytes, str]], trees: list[tuple[str, Path]]) -> None:
    print(f"\n{title}\n")
    heads = " | ".join(f"{label}: status | peak MiB | s | answer MiB | says" for label, _ in trees)
    print(f"| case | body MiB | {heads} |")
    print("| --- | --- |" + " --- | --- | --- | --- | --- |" * len(trees))
    for name, route, body, denial in cases:
        cells = []
        for _, tree in trees:
            r = measure(tree, route, body)
            figures = f"{r['peak_mib']:.0f} | {r['seconds']:.2f} | {r['answer_mib']:.1f}"
            cells.append(f"{r['status']} | {figures} | {r['summary']}")
        print(f"| {name} | {len(body) / MIB:.2f} | " + " | ".join(cells) + " |", flush=True)
        if denial:
            print(f"|  one more replica: `{denial}...` | | |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", nargs=2, metavar=("ROUTE", "BODY_FILE"), help=argparse.SUPPRESS)
    parser.add_argument("--before", type=Path, help="another source tree to measure as well")
    parser.add_argument("--skip-huge", action="store_true", help="leave out the 128 MiB /sync body")
    parser.add_argument("--only", choices=["jobs", "bodies"], help="one table")
    args = parser.parse_args()
    if args.case:
        run_case(*args.case)
        return
    sys.path.insert(0, str(REPO))
    trees = [("after", REPO)] + ([("before", args.before.resolve())] if args.before else [])
    load = os.getloadavg()[0]
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load average {load:.1f}, Python {sys.version.split()[0]}")
    if args.only != "bodies":
        table("Jobs (first sync: no children yet)", job_cases(), trees)
    if args.only != "jobs":
        table("Bodies", body_cases(args.skip_huge), trees)


if __name__ == "__main__":
    main()
