"""One container as one process group: started, polled, signalled and reaped without blocking.

Each container gets a session of its own, so a signal to its group reaches everything it started (torch
workers, mpirun's ranks, shell pipelines) and Ctrl-C at the terminal reaches only `trainop run`, which
then stops the groups in order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from trainop.local.containers import ContainerPlan
from trainop.local.paths import open_log

# containerd's exit code and reason for a container whose command could not be started.
START_ERROR_CODE = 128


def exit_code(returncode: int) -> int:
    """A Popen return code as kubelet reports it: killed by signal N -> 128 + N (SIGKILL -> 137)."""
    return 128 - returncode if returncode < 0 else returncode


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group. Zombies do not count: they are dead, only not yet reaped by
    whoever inherited them, and `killpg(pgid, 0)` would still find them."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Fields after the parenthesised command name: state, ppid, pgrp, ...
            state, _ppid, pgrp = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == pgid and state != "Z":
            members.append(int(entry.name))
    return members


def reason(code: int) -> str:
    return "Completed" if code == 0 else "Error"


@dataclass(frozen=True)
class Exit:
    code: int
    reason: str
    message: str = ""


class ContainerProcess:
    def __init__(
        self,
        plan: ContainerPlan,
        log_path: Path,
        environment: Mapping[str, str],
        enter: Callable[[], None] | None = None,
    ) -> None:
        self.plan = plan
        self.log_path = log_path
        # The variables under the container's own, and what the new process runs before its command
        # (joining the run's network namespace): trainop.local.sandbox.
        self.environment = environment
        self.enter = enter
        self._popen: subprocess.Popen[bytes] | None = None
        self.exit: Exit | None = None
        self._term_deadline: float | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**self.environment, **self.plan.env}
        with open(open_log(self.log_path), "ab") as log:
            try:
                self._popen = subprocess.Popen(
                    self.plan.argv,
                    cwd=self.plan.cwd,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=self.enter,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                message = f"failed to start {self.plan.argv[0]!r}: {detail}"
                log.write(f"trainop: {message}\n".encode())
                self.exit = Exit(START_ERROR_CODE, "StartError", message)

    def poll(self) -> Exit | None:
        """The exit, once the container's main process has ended; its leftovers are killed with it."""
        if self.exit is not None or self._popen is None:
            return self.exit
        returncode = self._popen.poll()
        if returncode is None:
            return None
        # kubelet tears the container down when its main process ends: nothing it started survives.
        self._signal_group(signal.SIGKILL)
        code = exit_code(returncode)
        self.exit = Exit(code, reason(code))
        return self.exit

    def terminate(self, grace: float, now: float) -> None:
        """SIGTERM the group now and SIGKILL it once `grace` seconds have passed (see `enforce`)."""
        if self._term_deadline is None and self.poll() is None:
            self._term_deadline = now + grace
            self._signal_group(signal.SIGTERM)

    def enforce(self, now: float) -> None:
        if self._term_deadline is not None and now >= self._term_deadline and self.poll() is None:
            self._signal_group(signal.SIGKILL)

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)

    @property
    def running(self) -> bool:
        return self.poll() is None and self._popen is not None

    def group_alive(self) -> bool:
        """Whether any process of the container's group is left (the main one or something it started)."""
        if self._popen is None:
            return False
        return self.running or bool(group_members(self._popen.pid))

    def wait(self, timeout: float) -> Exit | None:
        if self._popen is not None and self.exit is None:
            try:
                self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        return self.poll()

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._popen is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, sig)
