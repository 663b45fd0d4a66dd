"""The default TensorFlow server: what a TFJob replica annotated `trainop.dev/default-server.<Type>:
tensorflow` runs, in the job's own image, from the job's ConfigMap child.

It starts a `tf.distribute.Server` for this replica's task of the cluster in TF_CONFIG (which the
operator writes into every replica of a distributed TFJob) and serves until the pod is stopped. That is
all a parameter server does, and all a worker of TF2 parameter-server training does: the chief runs the
user's program and drives them over gRPC.

Standard library and TensorFlow only. When TensorFlow cannot be imported it says so on stderr and in the
termination log (what `kubectl describe pod` shows) and exits with NO_TENSORFLOW, the exit code the
operator recognises to name the cause in the job's Failed condition; 78 is below 128, so a replica with
restartPolicy ExitCode treats it as permanent. docs/parameter-server.md has the whole contract.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

NO_TENSORFLOW = 78
BAD_TF_CONFIG = 2
DEFAULT_PROTOCOL = "grpc"
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def report(message: str, termination_log: str) -> None:
    """`message` on stderr and in the termination log. kubelet creates that file before the container
    starts; where it does not exist (a local run) nothing is created."""
    print(f"trainop default server: {message}", file=sys.stderr, flush=True)
    path = Path(termination_log)
    if path.is_file():
        try:
            path.write_text(message + "\n", encoding="utf-8")
        except OSError as e:
            print(f"trainop default server: cannot write {path}: {e}", file=sys.stderr, flush=True)


def read_task(raw: str | None) -> tuple[dict[str, Any], str, int, str]:
    """(cluster, task type, task index, protocol) from TF_CONFIG; ValueError saying what is missing."""
    if not raw:
        raise ValueError(
            "TF_CONFIG is not set: the operator writes it into every replica of a distributed "
            "job, and a server alone has no cluster to serve"
        )
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not JSON: {e}") from e
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ValueError("TF_CONFIG needs a 'cluster' and a 'task' object")
    task_type, index = task.get("type"), task.get("index")
    if not isinstance(task_type, str) or not isinstance(index, int) or isinstance(index, bool):
        raise ValueError("TF_CONFIG's task needs a string 'type' and an integer 'index'")
    members = cluster.get(task_type)
    if isinstance(members, dict):
        present = str(index) in members
    else:
        present = isinstance(members, list) and 0 <= index < len(members)
    if not present:
        raise ValueError(f"TF_CONFIG's cluster has no {task_type} task {index}")
    protocol = config.get("rpc_layer") or DEFAULT_PROTOCOL
    return cluster, task_type, index, str(protocol)


def wait_for_stop() -> int:
    """Block until SIGTERM or SIGINT and return 0: the server threads serve meanwhile. Stopping is how a
    server ends (the job finished, or was deleted), not a failure."""
    received = signal.sigwait(STOP_SIGNALS)
    print(f"trainop default server: stopping on {signal.Signals(received).name}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--termination-log", default="/dev/termination-log")
    args = parser.parse_args(argv)
    # Blocked before TensorFlow starts its threads, which inherit the mask: only sigwait receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        cluster, task_type, index, protocol = read_task(os.environ.get("TF_CONFIG"))
    except ValueError as e:
        report(str(e), args.termination_log)
        return BAD_TF_CONFIG
    try:
        tf = importlib.import_module("tensorflow")
    except ImportError as e:
        report(
            f"this image has no TensorFlow ({e}), and the default {task_type} server runs the image's own "
            f"TensorFlow (so it always matches the other replicas'): use an image with TensorFlow, or give "
            f"the replica a command of its own (exit code {NO_TENSORFLOW})",
            args.termination_log,
        )
        return NO_TENSORFLOW
    # A sparse cluster (enableDynamicWorker) names tasks by index in JSON's string keys.
    spec = tf.train.ClusterSpec(
        {k: {int(i): a for i, a in v.items()} if isinstance(v, dict) else v for k, v in cluster.items()}
    )
    server = tf.distribute.Server(spec, job_name=task_type, task_index=index, protocol=protocol, start=True)
    print(
        f"trainop default server: TensorFlow {tf.__version__} {task_type} {index} serving {server.target} "
        f"for a cluster of {', '.join(f'{len(v)} {k}' for k, v in sorted(cluster.items()))}",
        flush=True,
    )
    return wait_for_stop()


if __name__ == "__main__":
    sys.exit(main())
