"""Load and scale on the real control plane: many jobs in one `kubectl apply`, then a few very wide ones.

    python bench/load_bench.py [--jobs 200] [--run-for 20s] [--big-jobs 10] [--big-workers 1000]
                               [--profile NAME=METACONTROLLER_FLAGS ...] [--hook-workers 2] [--keep]

Brings up the e2e stack of tests/e2e once (etcd, kube-apiserver with an audit log, KCM, kube-scheduler,
kwok, our webhooks and hooks under gunicorn, the real Metacontroller with the chart's flags) plus a kwok
node that fits every pod, then for each Metacontroller profile (the chart's flags plus the profile's;
Metacontroller is restarted between profiles; every run gets a namespace of its own):

1. ``--jobs`` mixed jobs (PyTorchJob, TFJob, XGBoostJob, JAXJob; 1 + 3 pods each; kwok runs every pod for
   ``--run-for``, then Succeeded) in one ``kubectl apply``;
2. after the last profile's run (or alone with ``--jobs 0``), ``--big-jobs`` PyTorchJobs of 1 Master +
   ``--big-workers`` Workers, also in one apply, with that profile's flags.

Per run it prints: seconds from apply to all Succeeded, how many jobs were ever seen Running (polled every
second), hook calls per job (mean and max, from the hook server's request log), hook calls after everything
finished (a window after things went quiet; see tests/e2e/loadgen.py), Metacontroller's failed syncs (its
log), Metacontroller's child writes per job by verb (the apiserver's audit log), hook server CPU seconds
(master + workers, /proc) and the largest resident set of one of its processes. A benchmark: no asserts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))

from faults import audited_stack
from loadgen import LoadRun, load_job, mixed_jobs, run_load
from observe import process_stats
from trainop_stack import TrainopStack

SETTLE_SECONDS = 10.0
MIB = 1024 * 1024


def row(profile: str, what: str, run: LoadRun, mc_cpu: float) -> str:
    calls = list(run.hook_calls.values()) or [0]
    writes = {k: v / run.jobs for k, v in run.child_writes.items()}
    per_job = ", ".join(f"{k} {v:g}" for k, v in sorted(writes.items())) or "none"
    return (
        f"| {profile} | {what} | {run.jobs} | {run.pods} | {run.apply_seconds:.1f} | "
        f"{run.seconds_to_all_succeeded:.1f} | "
        f"{len(run.seen_running)}/{run.jobs} | {sum(calls) / run.jobs:.1f} ({max(calls)}) | "
        f"{sum(run.calls_after_finish.values())} | {len(run.failed_syncs)} | {per_job} | "
        f"{run.hook_cpu_seconds:.1f} | {max(run.hook_peak_rss.values(), default=0) / MIB:.0f} | "
        f"{mc_cpu:.1f} |"
    )


def roomy_node(stack: TrainopStack, name: str, pods: int) -> None:
    """A kwok node that fits ``pods`` pods at once: PyTorch workers' init container requests 50m CPU, so
    the harness's 64-CPU node would hold only ~1280 of them and the scheduler would queue the rest."""
    stack.cp.create_node(name, pods=pods)
    room = {"cpu": str(pods), "memory": f"{pods}Gi", "pods": str(pods)}
    status = {"status": {"capacity": room, "allocatable": room}}  # kwok's node stage keeps what it finds
    stack.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status))


def measured(stack: TrainopStack, jobs: list[dict[str, Any]], timeout: float) -> tuple[LoadRun, float]:
    mc = stack.process("metacontroller")
    before = process_stats(mc.pid).cpu_seconds
    run = run_load(stack, jobs, timeout=timeout)
    return run, process_stats(mc.pid).cpu_seconds - before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--jobs", type=int, default=200, help="0 skips the mixed runs")
    ap.add_argument("--run-for", default="20s", help="how long kwok runs every pod (Go duration)")
    ap.add_argument("--big-jobs", type=int, default=10, help="0 skips the wide jobs")
    ap.add_argument("--big-workers", type=int, default=1000)
    ap.add_argument(
        "--profile",
        action="append",
        default=[],
        help="NAME=FLAGS: Metacontroller flags on top of the chart's (space-separated); default 'chart='",
    )
    ap.add_argument(
        "--hook-workers", type=int, default=2, help="gunicorn worker processes of the hook server"
    )
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    ap.add_argument("--keep", action="store_true", help="keep the work dir with all component logs")
    args = ap.parse_args()
    profiles = [(p.partition("=")[0], p.partition("=")[2].split()) for p in args.profile or ["chart="]]

    work = Path(tempfile.mkdtemp(prefix="trainop-load-"))
    rows: list[str] = []
    ok = False
    t = time.monotonic()
    # An hour's resync period keeps periodic resyncs out of every measured run.
    stack = audited_stack(
        work, metacontroller_args=profiles[0][1], hook_workers=args.hook_workers, resync_period_seconds=3600
    )
    try:
        # Finished runs stay (deleting thousands of pods runs at KCM's client rate and would load the next
        # run); they cost nothing once quiet, and the node fits them all.
        pods = len(profiles) * args.jobs * 4 + args.big_jobs * (args.big_workers + 1)
        roomy_node(stack, "kwok-node-load", pods + 100)
        print(f"stack up in {time.monotonic() - t:.1f}s (work dir {work})", file=sys.stderr)
        for name, flags in profiles if args.jobs else []:
            # A fresh Metacontroller per run: no backoff or queued retry carried over from the last one.
            stack.restart_metacontroller(flags)
            time.sleep(SETTLE_SECONDS)  # resyncs of earlier runs' jobs done, client token bucket full
            run, cpu = measured(stack, mixed_jobs(args.jobs, 3, args.run_for), args.timeout)
            rows.append(row(name, "mixed 1+3", run, cpu))
            print(rows[-1], file=sys.stderr)
        if args.big_jobs:
            name, flags = profiles[-1] if args.jobs else profiles[0]
            stack.restart_metacontroller(flags)
            time.sleep(SETTLE_SECONDS)
            big = [
                load_job("PyTorchJob", f"wide-{j}", args.big_workers, args.run_for)
                for j in range(args.big_jobs)
            ]
            run, cpu = measured(stack, big, args.timeout)
            rows.append(row(name, f"PyTorch 1+{args.big_workers}", run, cpu))
            print(rows[-1], file=sys.stderr)
        ok = True
    finally:
        stack.stop()
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work dir kept: {work}", file=sys.stderr)
    print(
        "| profile (Metacontroller flags beyond the chart's) | jobs | count | pods "
        "| kubectl apply (s) | apply -> all Succeeded (s) | jobs seen Running | hook calls/job mean (max) "
        "| hook calls after finish | Metacontroller failed syncs | child writes/job | hook CPU (s) "
        "| hook max RSS/process (MiB) | Metacontroller CPU (s) |"
    )
    print("|" + " --- |" * 14)
    for r in rows:
        print(r)
    print(
        f"(kwok runs every pod for {args.run_for}; hook server: {args.hook_workers} gunicorn gthread workers)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
