"""Fault injection on the e2e stack, shared by test_e2e_faults.py, test_e2e_load.py and bench/load_bench.py.

A component is killed the way an OOM kill or a lost node kills it: SIGKILL to its whole process group
(gunicorn's master and workers together), no graceful shutdown, requests in flight cut. It comes back
with the same flags on the same port, as a restarted pod behind the same Service would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from controlplane import ControlPlane, ControlPlaneError, ManagedProcess, default_bin_dir
from observe import enable_audit
from trainop_stack import TrainopStack, ensure_binaries


def kill(cp: ControlPlane, proc: ManagedProcess, timeout: float = 10.0) -> None:
    """SIGKILL the process group of ``proc``, wait until it is gone and drop it from teardown."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while proc.group_alive():
        proc.popen.poll()  # reap the leader
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"{proc.name} (pgid {proc.pid}) survived SIGKILL for {timeout:.0f}s")
        time.sleep(0.05)
    cp.stop_process(proc)  # closes its log; the group is already gone


def kill_component(stack: TrainopStack, name: str) -> ManagedProcess:
    proc = stack.process(name)
    kill(stack.cp, proc)
    return proc


def restart_hooks(stack: TrainopStack) -> ManagedProcess:
    proc = stack.start_hooks()  # same port: Metacontroller's hook URLs stay valid
    stack.wait_hooks_healthy(proc)
    return proc


def restart_webhooks(stack: TrainopStack) -> ManagedProcess:
    proc = stack.start_webhooks()  # same port and certificate: the registered configurations stay valid
    stack.wait_webhooks_healthy(proc)
    return proc


def restart_apiserver(stack: TrainopStack) -> ManagedProcess:
    """Start kube-apiserver again with its flags (audit included) on its port; returns once /readyz is ok."""
    return stack.cp.start_apiserver()


def restart_kwok(stack: TrainopStack) -> ManagedProcess:
    """kwok keeps its Stage delays as in-memory timers and loses them when the apiserver restarts
    (Running pods then never finish); a new kwok relists and starts every pod's timer afresh."""
    kill_component(stack, "kwok")
    return stack.cp.start_kwok()


def set_webhook_failure_policy(stack: TrainopStack, policy: str) -> None:
    """Set ``failurePolicy`` of every webhook of the stack's (Mutating|Validating)WebhookConfigurations."""
    for kind, name in stack.webhook_configs:
        config = stack.cp.get_json(f"{kind}/{name}")
        hooks = config.get("webhooks")
        count = len(hooks) if isinstance(hooks, list) else 0
        patch = [
            {"op": "replace", "path": f"/webhooks/{i}/failurePolicy", "value": policy} for i in range(count)
        ]
        stack.cp.kubectl("patch", kind, name, "--type=json", "-p", json.dumps(patch))


def audited_stack(
    work_dir: Path,
    *,
    metacontroller_args: Sequence[str] = (),
    hook_workers: int = 2,
    resync_period_seconds: int | None = None,
) -> TrainopStack:
    """A started TrainopStack of its own whose apiserver writes an audit log (``observe.enable_audit``).

    Fault tests get their own stack so that a component they kill can never break another test module.
    One retry when a random port was taken between picking and binding it. ``resync_period_seconds``
    replaces the installed CompositeControllers' period (``None``: the product's, as the fault tests need).
    """
    bin_dir = default_bin_dir()
    ensure_binaries(bin_dir, work_dir / "build-control-plane.log")

    def start(name: str) -> TrainopStack:
        stack = TrainopStack(
            work_dir / name,
            bin_dir,
            metacontroller_args=metacontroller_args,
            hook_workers=hook_workers,
            resync_period_seconds=resync_period_seconds,
        )
        enable_audit(stack.cp)
        return stack.start()

    try:
        return start("stack")
    except ControlPlaneError as e:
        if "address already in use" not in str(e):
            raise
        return start("stack-retry")
