"""`trainop run FILE`: the job a user would `kubectl apply`, run here with each pod as a local process."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from trainop.admission.admit import admit
from trainop.frameworks import kind_info
from trainop.install.schema import schema_errors
from trainop.local.display import Display, LiveDisplay, PlainDisplay, table
from trainop.local.manifest import ManifestError, as_created, load
from trainop.local.record import RunRecorder
from trainop.local.runner import EXIT_NOT_RUNNABLE, LocalRun, Options, Outcome, StopRequest

Json = dict[str, Any]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="a YAML file holding one kubeflow.org/v1 job")
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="stop everything after S seconds and exit 124"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        metavar="DIR",
        help="where logs and ConfigMap files go (default: ./trainop-runs/<job>-<timestamp>)",
    )
    parser.add_argument(
        "--grace-period",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL when stopping a pod (default: 5)",
    )
    parser.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="json: print the final job object on stdout (progress goes to stderr)",
    )


def run(args: argparse.Namespace) -> int:
    out: TextIO = sys.stderr if args.output == "json" else sys.stdout
    try:
        manifest = load(args.file)
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNABLE
    now = datetime.now(UTC)
    admission = admit(as_created(manifest.job, now))
    job = admission.job
    problems = schema_errors(job)
    if problems:
        # What the apiserver's schema validation and kubectl's strict field validation would refuse.
        details = "; ".join(str(p) for p in problems)
        print(
            f'error: {args.file}: the {job["kind"]} "{job["metadata"].get("name")}" is invalid: {details}',
            file=sys.stderr,
        )
        return EXIT_NOT_RUNNABLE
    result = admission.checks
    for warning in result.warnings:
        print(f"Warning: {warning}", file=sys.stderr)
    if not result.ok:
        print(denial(job, str(args.file), result.message), file=sys.stderr)
        return EXIT_NOT_RUNNABLE
    workdir = args.workdir or default_workdir(Path("trainop-runs"), str(job["metadata"]["name"]), now)
    options = Options(workdir=workdir, timeout=args.timeout, grace=args.grace_period)
    screen: Display = LiveDisplay(out) if out.isatty() else PlainDisplay(out)
    display = RunRecorder(screen, workdir)
    stop = StopRequest()
    with signals_to(stop):
        local = LocalRun(job, manifest, options, display, stop)
        display.attach(lambda: local.job, local.cluster.all_pods)
        outcome = local.run()
    display.close()
    display.finish(outcome.code, outcome.reason, outcome.job)
    (workdir / "job.json").write_text(json.dumps(outcome.job, indent=2) + "\n")
    out.write(summary(outcome, workdir))
    out.flush()
    if args.output == "json":
        sys.stdout.write(json.dumps(outcome.job, indent=2) + "\n")
        sys.stdout.flush()
    return outcome.code


def denial(job: Json, source: str, message: str) -> str:
    """The line `kubectl apply` prints when the validating webhook rejects the job."""
    webhook = f"validator.{kind_info(str(job['kind'])).singular}.training-operator.kubeflow.org"
    return (
        f'Error from server (Invalid): error when creating "{source}": '
        f'admission webhook "{webhook}" denied the request: {message}'
    )


def default_workdir(root: Path, job_name: str, now: datetime) -> Path:
    base = root / f"{job_name}-{now.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def summary(outcome: Outcome, workdir: Path) -> str:
    job = outcome.job
    lines = ["", f"{job['kind']} {job['metadata']['name']}: {outcome.reason}", "conditions:"]
    for cond in (job.get("status") or {}).get("conditions") or []:
        head = f"  {cond.get('type', ''):<11}{cond.get('status', ''):<7}"
        lines.append(f"{head}{cond.get('reason', '')}: {cond.get('message', '')}")
    if outcome.replicas:
        lines.append("replicas:")
        rows = [outcome.replicas[k] for k in sorted(outcome.replicas)]
        lines += [f"  {line}" for line in table(rows, "")[:-1]]
    lines.append(f"logs: {workdir / 'logs'}")
    return "\n".join(lines) + "\n"


@contextmanager
def signals_to(stop: StopRequest) -> Iterator[None]:
    """Route SIGINT and SIGTERM to `stop` while the job runs, so every pod is stopped before exiting."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.request(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
