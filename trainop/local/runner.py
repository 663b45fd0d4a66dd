"""The run loop: observe the local children, ask the sync hook what they should be, make it so, repeat.

Every decision about the job (restarts, backoffLimit, deadlines, cleanPodPolicy, suspend, success and
failure) is the hook's; this loop only turns its answers into processes and reports what they did.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from trainop.api import constants as c
from trainop.api.kinds import KindInfo
from trainop.controller.sync import sync
from trainop.frameworks import kind_info
from trainop.job.addresses import LocalAddresses
from trainop.job.conditions import finished, is_true
from trainop.job.mounts import controller_ref
from trainop.job.settings import Settings
from trainop.jsontypes import Json
from trainop.local import ports
from trainop.local.cluster import LocalCluster
from trainop.local.devices import Allocator, detect
from trainop.local.display import Display, Row
from trainop.local.errors import NotRunnableLocally
from trainop.local.kubelet import LocalPod, RunEvent
from trainop.local.logs import LogFollower, prefix, replica_name
from trainop.local.manifest import Manifest
from trainop.local.network import LoopbackNetwork
from trainop.local.sandbox import PASSED, Sandbox

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_NOT_RUNNABLE = 2
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130

# Sync at least this often even when nothing changed, as Metacontroller's resync period does.
HEARTBEAT_SECONDS = 5.0


@dataclass(frozen=True)
class Options:
    workdir: Path
    timeout: float | None = None
    grace: float = 5.0
    poll: float = 0.2
    # The user's whole environment for every process instead of the minimal one (trainop.local.sandbox).
    inherit_env: bool = False
    # The namespace every process of the run joins; None: this machine's network.
    network: LoopbackNetwork | None = None
    # This machine's accelerators and who holds them; None: detect them when the run starts.
    devices: Allocator | None = None


@dataclass
class Outcome:
    code: int
    job: Json
    reason: str
    # Last state of every pod the run had, by replica name, for the summary.
    replicas: dict[str, Row] = field(default_factory=dict)


class StopRequest:
    """Set from a signal handler: the first request stops gracefully, a second one kills at once."""

    def __init__(self) -> None:
        self.count = 0
        self.signal_name = ""

    def request(self, name: str = "") -> None:
        self.count += 1
        self.signal_name = self.signal_name or name

    @property
    def requested(self) -> bool:
        return self.count > 0

    @property
    def urgent(self) -> bool:
        return self.count > 1


class LocalRun:
    def __init__(
        self, job: Json, manifest: Manifest, options: Options, display: Display, stop: StopRequest
    ) -> None:
        self.options = options
        self.display = display
        self.stop = stop
        # As the apiserver stores it behind the defaulting webhook; the caller has validated it.
        self.job = job
        self.info: KindInfo = kind_info(str(job["kind"]))
        self.name = str(job["metadata"]["name"])
        self.settings = Settings(addresses=LocalAddresses(ports.allocate(self.info, job)), wait_for_dns=False)
        sandbox = Sandbox(dict(os.environ), options.inherit_env, options.network)
        self.cluster = LocalCluster(
            self.info,
            manifest.base_dir,
            options.workdir,
            sandbox,
            options.grace,
            given_config_maps=manifest.config_maps,
            owner=controller_ref(job),
            devices=options.devices or Allocator(detect()),
        )
        self.followers: dict[Path, LogFollower] = {}
        self.rows: dict[str, Row] = {}
        self.announced: set[tuple[str, str]] = set()
        self.started = 0.0
        self.last_observed: dict[str, dict[str, Json]] | None = None
        self.due = 0.0  # monotonic time of the next resync

    # ---- loop ---------------------------------------------------------------------------------------
    def run(self) -> Outcome:
        self.started = time.monotonic()
        self.options.workdir.mkdir(parents=True, exist_ok=True)
        self.display.event(f"{self.info.kind} {self.name}: logs in {self.cluster.logs_dir}")
        self.display.event("images are ignored: every container runs its command on this machine")
        self.display.event(_confinement(self.options))
        try:
            while True:
                outcome = self._tick(time.monotonic())
                if outcome is not None:
                    return outcome
                time.sleep(self.options.poll)
        except NotRunnableLocally as exc:
            return self._end(EXIT_NOT_RUNNABLE, f"cannot run locally: {exc}")
        except BaseException:
            # A bug here or in the hook must not leave training processes running without a supervisor.
            self.cluster.kill_all()
            raise

    def _tick(self, now: float) -> Outcome | None:
        if self.stop.requested:
            return self._end(EXIT_INTERRUPTED, f"interrupted by {self.stop.signal_name or 'a signal'}")
        if self.options.timeout is not None and now - self.started >= self.options.timeout:
            return self._end(EXIT_TIMEOUT, f"--timeout of {self.options.timeout:g}s reached")
        events = self.cluster.step(now)
        # A process's last lines come before the news that it exited.
        self._follow_logs()
        self._show(events)
        observed = self.cluster.observed()
        # Like Metacontroller: sync on every change of a child, and on the resync period otherwise.
        if observed != self.last_observed or now >= self.due:
            outcome = self._sync(observed, now)
            if outcome is not None:
                return outcome
        self._follow_logs()
        self._refresh_table()
        self.display.flush()
        return None

    def _sync(self, observed: dict[str, dict[str, Json]], now: float) -> Outcome | None:
        result = sync(self.job, observed, self.settings, datetime.now(UTC))
        self.job["status"] = result.status
        self._announce_conditions()
        self._show(self.cluster.apply(result.children, now))
        self.last_observed = observed
        resync = HEARTBEAT_SECONDS if result.resync_after_seconds is None else result.resync_after_seconds
        self.due = now + min(resync, HEARTBEAT_SECONDS)
        conditions = list(result.status.get("conditions") or [])
        if finished(conditions):
            succeeded = is_true(conditions, c.SUCCEEDED)
            return self._end(EXIT_SUCCEEDED if succeeded else EXIT_FAILED, _terminal(conditions))
        if result.delete_parent:
            return self._end(EXIT_SUCCEEDED, "ttlSecondsAfterFinished expired")
        if is_true(conditions, c.SUSPENDED) and not self.cluster.all_pods():
            # Nothing can resume it here (on a cluster Kueue or a user would): waiting would be forever.
            return self._end(EXIT_SUCCEEDED, "job Suspended: spec.runPolicy.suspend is true, so nothing runs")
        return None

    def _end(self, code: int, reason: str) -> Outcome:
        if code == EXIT_SUCCEEDED:
            # On a cluster the other replicas would carry on (cleanPodPolicy None); give them the grace
            # period to finish on their own, so their last lines and exit codes are real ones.
            self._drain()
        self._refresh_rows()
        self.display.event(f"stopping: {reason}")
        self.cluster.delete_all(time.monotonic())
        while self.cluster.terminating:
            if self.stop.urgent:
                self.cluster.kill_all()
            self._show(self.cluster.step(time.monotonic()))
            self._follow_logs()
            self.display.flush()
            time.sleep(0.05)
        self._follow_logs(final=True)
        self.display.flush()
        rows = {
            k: Row(r.replica, f"{r.state} (stopped)", r.restarts, r.elapsed) if r.active else r
            for k, r in self.rows.items()
        }
        return Outcome(code, self.job, reason, rows)

    def _drain(self) -> None:
        deadline = time.monotonic() + self.options.grace
        while time.monotonic() < deadline and not self.stop.requested:
            self._show(self.cluster.step(time.monotonic()))
            if not any(p.phase in ("Pending", "Running") for p in self.cluster.pods.values()):
                return
            self._follow_logs()
            self.display.flush()
            time.sleep(0.05)

    # ---- what people see ----------------------------------------------------------------------------
    def _show(self, events: list[RunEvent]) -> None:
        for event in events:
            replica = replica_name(self.name, event.pod)
            who = replica if not event.container else f"{replica}/{event.container}"
            self.display.event(f"{who} {event.text}")

    def _announce_conditions(self) -> None:
        for cond in (self.job.get("status") or {}).get("conditions") or []:
            key = (str(cond.get("type")), str(cond.get("reason")))
            if cond.get("status") == "True" and key not in self.announced:
                self.announced.add(key)
                self.display.event(f"job {cond.get('type')}: {cond.get('message')}")

    def _follow_logs(self, final: bool = False) -> None:
        for pod in self.cluster.all_pods():
            for container in pod.containers():
                follower = self.followers.get(container.log_path)
                if follower is None:
                    tag = prefix(self.name, pod.name, container.name, self.info.default_container)
                    follower = self.followers[container.log_path] = LogFollower(container.log_path, tag)
        for follower in self.followers.values():
            for line in follower.read(final):
                self.display.log(follower.prefix, line)

    def _refresh_rows(self) -> None:
        now = time.monotonic()
        for pod in self.cluster.all_pods():
            self.rows[replica_name(self.name, pod.name)] = _row(self.name, pod, now)

    def _refresh_table(self) -> None:
        self._refresh_rows()
        rows = [self.rows[k] for k in sorted(self.rows)]
        self.display.status(rows, f"{self.info.kind} {self.name}: {_state(self.job)}")


def _confinement(options: Options) -> str:
    network = (
        f"one network namespace with only loopback (set up in {options.network.setup_seconds * 1000:.0f} ms)"
        if options.network
        else "this machine's network (other machines can reach what they listen on)"
    )
    hidden = options.network.hidden if options.network else ()
    sockets = (
        f"{', '.join(hidden)} empty (this machine's sockets hidden)"
        if hidden
        else "this machine's Unix sockets (docker.sock, your ssh agent)"
    )
    env = (
        "your whole environment"
        if options.inherit_env
        else f"only {', '.join(PASSED)}, LC_* from your environment, and a HOME in the run folder"
    )
    return f"the replicas share {network}; they get {env}; they see {sockets}"


def _row(job_name: str, pod: LocalPod, now: float) -> Row:
    state = pod.phase
    if pod.deleted_at is not None:
        state = "Terminating" if not pod.gone() else f"{pod.phase} (deleted)"
    elif any(c.restart_at is not None for c in pod.containers()):
        state = "CrashLoopBackOff"
    elif pod.phase == "Failed":
        codes = sorted({c.exit.code for c in pod.containers() if c.exit and c.exit.code})
        state = f"Failed (exit {', '.join(map(str, codes))})" if codes else state
    restarts = sum(c.restart_count for c in pod.containers())
    start, end = pod.started_mono, pod.ended_mono or now
    elapsed = end - start if start is not None else 0.0
    active = pod.deleted_at is None and pod.phase in ("Pending", "Running")
    return Row(replica_name(job_name, pod.name), state, restarts, elapsed, active)


def _state(job: Json) -> str:
    true = [x for x in (job.get("status") or {}).get("conditions") or [] if x.get("status") == "True"]
    return str(true[-1].get("type")) if true else "Pending"


def _terminal(conditions: list[Json]) -> str:
    last = next(
        x
        for x in reversed(conditions)
        if x.get("type") in (c.SUCCEEDED, c.FAILED) and x.get("status") == "True"
    )
    return f"job {last.get('type')}: {last.get('message')}"
