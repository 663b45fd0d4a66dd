"""`trainop run FILE`: the job a user would `kubectl apply`, run here with each pod as a local process."""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO, cast

from trainop.admission.admit import admit
from trainop.envvalues import SettingError
from trainop.extensions import EXTENSIONS, check_settings, owned
from trainop.extensions.base import Extension
from trainop.extensions.faces import LocalRefusal
from trainop.frameworks import kind_info
from trainop.install.schema import schema_errors
from trainop.jsontypes import Json
from trainop.local.devices import Allocator, InventoryError
from trainop.local.devices import detect as detect_devices
from trainop.local.display import Display, LiveDisplay, PlainDisplay, table
from trainop.local.manifest import ManifestError, as_created, load
from trainop.local.network import LoopbackNetwork, Unconfined, loopback_network
from trainop.local.pipe import ReaderGone
from trainop.local.podspec import template_errors
from trainop.local.record import RunRecorder
from trainop.local.runner import (
    EXIT_INTERRUPTED,
    EXIT_NOT_RUNNABLE,
    LocalRun,
    Options,
    Outcome,
    StopRequest,
)
from trainop.local.sandbox import PASSED, hidden_folders
from trainop.local.services import ServerError, ServerProcess

CONFINEMENT = f"""\
confinement (docs/local-confinement.md):
  environment  every process starts with only these of your variables:
                 {", ".join(PASSED)}, LC_*
               then HOME (a folder of its own, home/<pod> in the run folder), HOSTNAME (the pod's
               name) and the container's env. --inherit-env: your whole environment instead.
  network      the replicas share one network namespace with only loopback: they reach each other on
               127.0.0.1, nothing they listen on is reachable from other machines (torch's TCPStore
               and JAX's coordinator bind every interface), and they cannot reach the network. Where
               the machine refuses the namespace, the run warns and goes on without it.
               --host-network: this machine's network, on purpose.
  sockets      the replicas see /run, /var/run and the folder of $SSH_AUTH_SOCK empty (a mount
               namespace), so they cannot reach docker.sock or your ssh agent; SSH_AUTH_SOCK,
               DOCKER_HOST and the like are not passed. With --host-network they are reachable.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = CONFINEMENT
    parser.add_argument(
        "file",
        metavar="FILE|URL|example:NAME",
        help="a YAML file, or an https URL of one, holding one kubeflow.org/v1 job and the ConfigMaps it "
        "mounts; or example:NAME, one of `trainop examples` (plain http only from localhost)",
    )
    parser.add_argument(
        "--ca-file",
        type=Path,
        metavar="PEM",
        help="trust only these CA certificates for an https URL (default: the system's, or SSL_CERT_FILE)",
    )
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
    parser.add_argument(
        "--inherit-env",
        action="store_true",
        help="give every process your whole environment instead of the minimal one below",
    )
    parser.add_argument(
        "--share-devices",
        action="store_true",
        help="let pods share accelerators (default: each device goes to one pod at a time, and a pod "
        "that cannot get its devices stays Pending, as on a cluster)",
    )
    # The extensions' own options (--tensorboard, --log-format), in registry order.
    for ext in EXTENSIONS:
        for option in ext.run_options():
            option.add_to(parser)
    parser.add_argument(
        "--host-network",
        action="store_true",
        help="run the replicas in this machine's network instead of a namespace with only loopback",
    )


def run(args: argparse.Namespace) -> int:
    """`trainop run`, with Ctrl-C and SIGTERM routed to a graceful stop from its first line on."""
    stop = StopRequest()
    with signals_to(stop):
        return run_until(args, stop)


def run_until(args: argparse.Namespace, stop: StopRequest) -> int:
    """`trainop run` under signal handlers the caller installed for `stop`: a signal during the set-up
    ends the run at its first step, before any pod starts. (Without handlers, a Ctrl-C landing in the
    fork that makes the network namespace is swallowed by an at-fork callback and the run goes on.)"""
    # `trainop run ... | head` closes the pipe under us: stop as on a signal, so the run records its end.
    stream = sys.stderr if args.output == "json" else sys.stdout
    out = cast(TextIO, ReaderGone(stream, lambda: stop.request("a closed pipe")))
    try:
        # The extensions' cluster settings, as the servers refuse them at start-up: a run that admitted
        # and synced the job with a malformed one would fail, or default the job, otherwise than a cluster.
        check_settings(os.environ)
    except SettingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNABLE
    try:
        manifest = load(args.file, args.ca_file)
    except ManifestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNABLE
    now = datetime.now(UTC)
    chosen = [(ext, options_of(ext, args)) for ext in EXTENSIONS]
    submitted = manifest.job
    for ext, given in chosen:
        submitted = ext.submitted(submitted, given)
    admission = admit(as_created(submitted, now))
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
    pod_errors = template_errors(kind_info(str(job["kind"])), job)
    if pod_errors:
        # On a cluster the job is stored, and the apiserver refuses each of its pods with these errors.
        details = "; ".join(str(p) for p in pod_errors)
        print(
            f"error: {args.file}: the apiserver would refuse the pods of {job['kind']} "
            f'"{job["metadata"].get("name")}": {details}',
            file=sys.stderr,
        )
        return EXIT_NOT_RUNNABLE
    try:
        inventory = detect_devices()
    except InventoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNABLE
    for ext in EXTENSIONS:
        for notice in ext.local_notices(owned(ext, job)):
            print(f"notice: {notice}", file=sys.stderr)
    workdir = args.workdir or default_workdir(Path("trainop-runs"), str(job["metadata"]["name"]), now)
    servers: list[ServerProcess] = []
    for ext, given in chosen:
        try:
            setup = ext.local_setup(job, given, workdir)
        except LocalRefusal as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_NOT_RUNNABLE
        job = setup.job
        servers += [ServerProcess(server, workdir) for server in setup.servers]
    network = None if args.host_network else confined_network(workdir)
    options = Options(
        workdir=workdir,
        timeout=args.timeout,
        grace=args.grace_period,
        inherit_env=args.inherit_env,
        network=network,
        devices=Allocator(inventory, share=args.share_devices),
    )
    screen: Display = LiveDisplay(out) if out.isatty() else PlainDisplay(out)
    display = RunRecorder(screen, workdir)
    for server in servers:
        try:
            url = server.start()
        except ServerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_NOT_RUNNABLE
        # Whatever ends this process, the server (in a session of its own) goes with it.
        atexit.register(server.stop)
        display.servers[server.server.record_key] = {"url": url}
        print(f"{server.server.name}: {url} (over {server.server.directory})", file=out, flush=True)
    try:
        local = LocalRun(job, manifest, options, display, stop)
        display.attach(lambda: local.job, local.cluster.all_pods)
        outcome = local.run()
    finally:
        if network:
            network.close()
    display.close()
    display.finish(outcome.code, outcome.reason, outcome.job)
    (workdir / "job.json").write_text(json.dumps(outcome.job, indent=2) + "\n")
    out.write(summary(outcome, workdir))
    out.flush()
    if args.output == "json":
        sys.stdout.write(json.dumps(outcome.job, indent=2) + "\n")
        sys.stdout.flush()
    lasting = [s for s in servers if s.server.outlives_job]
    if lasting and outcome.code != EXIT_INTERRUPTED:
        keep_serving(lasting, out)
    for server in servers:
        server.stop()
    return outcome.code


def options_of(ext: Extension, args: argparse.Namespace) -> dict[str, Any]:
    """The values of `ext`'s own options, by flag (None when not given)."""
    return {option.flag: getattr(args, option.dest, None) for option in ext.run_options()}


def keep_serving(servers: list[ServerProcess], out: TextIO) -> None:
    """After the job: the servers (TensorBoard) go on until Ctrl-C (or SIGTERM), as a cluster's outlive
    the job."""
    for server in servers:
        print(f"{server.server.name} keeps serving {server.url} until Ctrl-C", file=out, flush=True)
    stop = StopRequest()
    with signals_to(stop):
        while not stop.requested and any(server.alive() for server in servers):
            time.sleep(0.2)


def confined_network(workdir: Path) -> LoopbackNetwork | None:
    """The run's loopback-only namespace, with this machine's socket folders hidden where the kernel lets
    us, or None; a warning says what is not confined, and why."""
    needed = [workdir, Path.cwd(), *([Path(os.environ["TMPDIR"])] if os.environ.get("TMPDIR") else [])]
    hiding = hidden_folders(os.environ, needed)
    for folder, why in hiding.kept:
        print(f"WARNING: the replicas can reach the Unix sockets in {folder}: {why}.", file=sys.stderr)
    try:
        return loopback_network(hide=hiding.folders)
    except Unconfined as exc:
        refused = str(exc)
    if hiding.folders:
        print(
            f"WARNING: the replicas can reach this machine's Unix sockets in {', '.join(hiding.folders)} "
            f"(the Docker daemon's, your ssh agent's: they act for whoever connects): {refused}.",
            file=sys.stderr,
        )
        try:
            return loopback_network()
        except Unconfined as exc:
            refused = str(exc)
    for line in (
        f"WARNING: the replicas will share this machine's network: {refused}.",
        "WARNING: what they listen on (torch's TCPStore and JAX's coordinator bind every interface, "
        "without authentication) is reachable from other machines while the job runs.",
        "WARNING: allow user namespaces to confine them, or pass --host-network to run this way on purpose.",
    ):
        print(line, file=sys.stderr)
    return None


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
    # The runs' pages (timeline, merged log, Events) are one command away; say which.
    lines.append(f"pages: trainop ui {shlex.quote(str(workdir.parent))}")
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
