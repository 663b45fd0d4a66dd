"""A pod as kubelet would run it on this machine: init containers in order, then every container at once,
restarted in place per the pod's restartPolicy, and reported back as a Kubernetes Pod object.

The job-level decisions (recreate a failed pod, backoffLimit, deadlines, cleanPodPolicy) are not made
here: the sync hook makes them from what this reports, exactly as on a cluster.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from trainop.api.times import timestamp
from trainop.jsontypes import Json
from trainop.local.containers import LOOPBACK, ContainerPlan
from trainop.local.paths import inside
from trainop.local.process import ContainerProcess, Exit

# kubelet backs off 10s doubling to 5 min; a local run wants feedback sooner but still no hot loop.
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0


def backoff(restarts: int) -> float:
    return float(min(BACKOFF_BASE_SECONDS * 2**restarts, BACKOFF_MAX_SECONDS))


def should_restart(policy: str, code: int) -> bool:
    return policy == "Always" or (policy == "OnFailure" and code != 0)


@dataclass
class Container:
    plan: ContainerPlan
    log_path: Path
    init: bool = False
    restart_count: int = 0
    process: ContainerProcess | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    last: Json | None = None  # lastState.terminated, kept across restarts
    # Monotonic time of the next start while backing off; None when not waiting for one.
    restart_at: float | None = None

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def exit(self) -> Exit | None:
        return self.process.exit if self.process else None

    def terminated(self) -> Json | None:
        if self.exit is None:
            return None
        out: Json = {"exitCode": self.exit.code, "reason": self.exit.reason}
        if self.exit.message:
            out["message"] = self.exit.message
        if self.started_at:
            out["startedAt"] = timestamp(self.started_at)
        if self.finished_at:
            out["finishedAt"] = timestamp(self.finished_at)
        return out

    def state(self) -> Json:
        if self.restart_at is not None:
            return {"waiting": {"reason": "CrashLoopBackOff"}}
        if self.process is None:
            return {"waiting": {"reason": "PodInitializing"}}
        terminated = self.terminated()
        if terminated:
            return {"terminated": terminated}
        return {"running": {"startedAt": timestamp(self.started_at or datetime.now(UTC))}}

    def status(self) -> Json:
        out: Json = {
            "name": self.name,
            "restartCount": self.restart_count,
            "ready": self.process is not None and self.exit is None and self.restart_at is None,
            "state": self.state(),
        }
        if self.last:
            out["lastState"] = {"terminated": self.last}
        return out


@dataclass
class RunEvent:
    """Something a person watching the run wants to see: a start, an exit, a restart, a phase."""

    pod: str
    container: str
    text: str


@dataclass
class LocalPod:
    desired: Json
    init_plans: list[ContainerPlan]
    plans: list[ContainerPlan]
    logs_dir: Path
    # What every container starts with under its own env (trainop.local.sandbox), and what it runs first.
    environment: Mapping[str, str]
    enter: Callable[[], None] | None = None
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    deleted_at: datetime | None = None
    init: list[Container] = field(init=False)
    main: list[Container] = field(init=False)
    phase: str = field(init=False, default="Pending")
    started_mono: float | None = field(init=False, default=None)
    ended_mono: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.init = [
            Container(p, self.log_path(p.name, f"spec.initContainers[{i}].name"), init=True)
            for i, p in enumerate(self.init_plans)
        ]
        self.main = [
            Container(p, self.log_path(p.name, f"spec.containers[{i}].name"))
            for i, p in enumerate(self.plans)
        ]

    @property
    def name(self) -> str:
        return str(self.desired["metadata"]["name"])

    @property
    def restart_policy(self) -> str:
        return str(self.desired["spec"].get("restartPolicy") or "Always")

    def log_path(self, container: str, field: str) -> Path:
        return inside(self.logs_dir, self.name, f"{container}.log", field=field)

    def containers(self) -> list[Container]:
        return self.init + self.main

    # ---- kubelet ------------------------------------------------------------------------------------
    def step(self, now: float) -> list[RunEvent]:
        """Advance the pod by what its processes did since the last step; `now` is monotonic time."""
        events: list[RunEvent] = []
        if self.deleted_at is not None:
            for c in self.containers():
                if c.process:
                    c.process.enforce(now)
                    self._reap(c, events)
            self._set_phase(now)
            return events
        if self.phase in ("Succeeded", "Failed"):
            return events
        if self.started_mono is None:
            self.started_mono = now
        pending_init = next((c for c in self.init if c.exit is None or c.exit.code != 0), None)
        if pending_init is not None:
            self._run_init(pending_init, now, events)
        else:
            for c in self.main:
                self._run(c, now, events)
        self._set_phase(now)
        return events

    def _set_phase(self, now: float) -> None:
        self.phase = self._phase()
        if self.phase in ("Succeeded", "Failed") and self.ended_mono is None:
            self.ended_mono = now

    def _run_init(self, c: Container, now: float, events: list[RunEvent]) -> None:
        if c.process is None or c.restart_at is not None:
            self._start_when_due(c, now, events)
            return
        exit = self._reap(c, events)
        # Init containers must succeed; under Never a failure fails the pod, otherwise kubelet retries.
        if exit is not None and exit.code != 0 and self.restart_policy != "Never":
            self._back_off(c, now, events)

    def _run(self, c: Container, now: float, events: list[RunEvent]) -> None:
        if c.process is None or c.restart_at is not None:
            self._start_when_due(c, now, events)
            return
        exit = self._reap(c, events)
        if exit is not None and should_restart(self.restart_policy, exit.code):
            self._back_off(c, now, events)

    def _start_when_due(self, c: Container, now: float, events: list[RunEvent]) -> None:
        if c.restart_at is not None and now < c.restart_at:
            return
        if c.restart_at is not None:
            c.restart_count += 1
            c.last = c.terminated()
            c.restart_at = None
        c.process = ContainerProcess(c.plan, c.log_path, self.environment, self.enter)
        c.started_at, c.finished_at = datetime.now(UTC), None
        c.process.start()
        if c.process.exit is not None:
            c.finished_at = c.started_at
            events.append(RunEvent(self.name, c.name, c.process.exit.message))
        else:
            what = "restarted" if c.restart_count else "started"
            events.append(RunEvent(self.name, c.name, f"{what} (pid {c.process.pid})"))

    def _reap(self, c: Container, events: list[RunEvent]) -> Exit | None:
        if c.process is None or c.finished_at is not None:
            return None
        exit = c.process.poll()
        if exit is not None:
            c.finished_at = datetime.now(UTC)
            events.append(RunEvent(self.name, c.name, f"exited with code {exit.code}"))
        return exit

    def _back_off(self, c: Container, now: float, events: list[RunEvent]) -> None:
        delay = backoff(c.restart_count)
        c.restart_at = now + delay
        events.append(
            RunEvent(self.name, c.name, f"restarting in {delay:g}s (restartPolicy {self.restart_policy})")
        )

    def _phase(self) -> str:
        failed_init = any(c.exit is not None and c.exit.code != 0 and c.restart_at is None for c in self.init)
        if failed_init and self.restart_policy == "Never":
            return "Failed"
        if any(c.exit is None or c.exit.code != 0 for c in self.init):
            return "Pending"
        if any(c.process is None or c.exit is None or c.restart_at is not None for c in self.main):
            return "Running"
        return "Succeeded" if all(c.exit and c.exit.code == 0 for c in self.main) else "Failed"

    # ---- deletion -----------------------------------------------------------------------------------
    def delete(self, grace: float, now: float) -> None:
        """Start stopping the pod: SIGTERM to every container's group, SIGKILL after `grace` seconds."""
        if self.deleted_at is None:
            self.deleted_at = datetime.now(UTC)
        for c in self.containers():
            c.restart_at = None
            if c.process:
                c.process.terminate(grace, now)

    def kill(self) -> None:
        for c in self.containers():
            if c.process:
                c.process.kill()

    def gone(self) -> bool:
        """Deleted and nothing of it left running."""
        return self.deleted_at is not None and not any(
            c.process and c.process.group_alive() for c in self.containers()
        )

    # ---- what the hook sees -------------------------------------------------------------------------
    def observed(self) -> Json:
        meta = copy.deepcopy(self.desired.get("metadata") or {})
        meta.update(uid=self.uid, creationTimestamp=timestamp(self.created))
        if self.deleted_at is not None:
            meta["deletionTimestamp"] = timestamp(self.deleted_at)
        status: Json = {
            "phase": self.phase,
            "hostIP": LOOPBACK,
            "podIP": LOOPBACK,
            "podIPs": [{"ip": LOOPBACK}],
            "startTime": timestamp(self.created),
            "containerStatuses": [c.status() for c in self.main],
        }
        if self.init:
            status["initContainerStatuses"] = [c.status() for c in self.init]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": copy.deepcopy(self.desired.get("spec") or {}),
            "status": status,
        }
