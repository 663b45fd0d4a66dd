"""The sync hook as a pure function: a job and its observed children in; desired children and status out.

Everything the operator remembers lives in the returned status, and the status is a function of the
observed children and the previous status alone, with `now` used only for transition times. So a
resync of an unchanged job returns byte-identical output and Metacontroller writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from trainop.admission.defaults import apply_defaults
from trainop.admission.validation import validate
from trainop.api import constants as c
from trainop.api.jsonpath import dig
from trainop.api.jsonvalues import clean
from trainop.api.kinds import KindInfo, kind_info
from trainop.api.times import parse_timestamp, timestamp
from trainop.controller import children as build
from trainop.controller import events as implied
from trainop.controller import podgroups
from trainop.controller.events import Event, SyncFacts
from trainop.frameworks import framework
from trainop.frameworks.base import Counts, Framework
from trainop.job.conditions import find, finished, is_true, set_condition
from trainop.job.context import JobContext
from trainop.job.observed import SERVICE, ObservedPod, objects, pods_of
from trainop.job.settings import Settings

Json = dict[str, Any]
Children = Mapping[str, Mapping[str, Json]]

# Containers killed by a signal exit with 128 + signal; Kubeflow retries those under ExitCode.
RETRYABLE_EXIT_CODE = 128
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"


@dataclass(frozen=True)
class SyncResult:
    status: Json
    children: list[Json]
    resync_after_seconds: float | None = None
    # ttlSecondsAfterFinished has expired: the caller deletes the job (a hook cannot delete its parent).
    delete_parent: bool = False
    # The Kubernetes Events this sync implies; the caller records them (hooks.recorder).
    events: tuple[Event, ...] = ()

    def response(self) -> Json:
        """The body Metacontroller expects from a sync hook."""
        out: Json = {"status": self.status, "children": self.children}
        if self.resync_after_seconds is not None:
            # A float field for Metacontroller, but whole numbers go out as ints like everything else.
            out["resyncAfterSeconds"] = clean(self.resync_after_seconds)
        return out


def managed_elsewhere(job: Json) -> bool:
    managed_by = dig(job, "spec", "runPolicy", "managedBy")
    # A non-string managedBy names no controller: validation reports it below.
    return isinstance(managed_by, str) and bool(managed_by) and managed_by != c.MANAGED_BY_US


def sync(parent: Json, children: Children, settings: Settings, now: datetime) -> SyncResult:
    """Compute the desired children and status of one job (any of the seven kinds)."""
    info = kind_info(str(parent.get("kind")))
    previous = {k: v for k, v in (parent.get("status") or {}).items() if k != "observedGeneration"}
    if managed_elsewhere(parent):
        # Another controller (MultiKueue) owns this job: touch nothing.
        return SyncResult(
            status=previous, children=[o for group in children.values() for o in group.values()]
        )
    job = apply_defaults(parent)
    checked = validate(job)
    if not checked.ok:
        return _invalid(info, job, previous, checked.message, now)
    ctx = JobContext(info, job, settings)
    return _Sync(ctx, framework(info.kind), children, previous, now).run()


def _invalid(info: KindInfo, job: Json, previous: Json, message: str, now: datetime) -> SyncResult:
    """A job that bypassed validation: Failed with the webhook's message, no children, and its TTL kept."""
    stamp = timestamp(now)
    reason = f"{info.kind}FailedValidation"
    previous_conditions = list(previous.get("conditions") or [])
    conditions = set_condition(previous_conditions, c.FAILED, "True", reason, message, stamp)
    status = {**previous, "conditions": conditions}
    status.setdefault("completionTime", stamp)
    events = () if conditions is previous_conditions else (implied.invalid(info.kind, message),)
    ttl = dig(job, "spec", "runPolicy", "ttlSecondsAfterFinished")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        return SyncResult(status=status, children=[], events=events)
    remaining = (parse_timestamp(status["completionTime"]) - now).total_seconds() + ttl
    if remaining <= 0:
        return SyncResult(status=status, children=[], delete_parent=True, events=events)
    return SyncResult(status=status, children=[], resync_after_seconds=round(remaining, 3), events=events)


@dataclass
class _Sync:
    ctx: JobContext
    fw: Framework
    children: Children
    previous: Json
    now: datetime
    conditions: list[Json] = field(default_factory=list)
    resync: list[float] = field(default_factory=list)
    restarting: set[str] = field(default_factory=set)
    exit_code_failures: list[tuple[str, ObservedPod]] = field(default_factory=list)

    @property
    def info(self) -> KindInfo:
        return self.ctx.info

    @property
    def stamp(self) -> str:
        return timestamp(self.now)

    def condition(self, ctype: str, status: str, reason: str, message: str) -> None:
        self.conditions = set_condition(
            self.conditions, ctype, status, f"{self.info.kind}{reason}", message, self.stamp
        )

    def run(self) -> SyncResult:
        result = self.outcome()
        facts = SyncFacts(
            ctx=self.ctx,
            fw=self.fw,
            children=self.children,
            pods=self.pods,
            previous=self.previous,
            status=result.status,
            desired=result.children,
            restarting=frozenset(self.restarting),
            exit_code_failures=tuple(self.exit_code_failures),
        )
        return replace(result, events=tuple(implied.derive(facts)))

    def outcome(self) -> SyncResult:
        self.conditions = list(self.previous.get("conditions") or [])
        self.pods = pods_of(self.children, str(self.ctx.job["metadata"].get("uid") or ""))
        if find(self.conditions, c.CREATED) is None:
            self.condition(c.CREATED, "True", "Created", f"{self.info.kind} {self.ctx.name} is created.")
        if finished(self.conditions):
            return self.finished(dict(self.previous.get("replicaStatuses") or {}), self.previous)
        if self.ctx.suspended:
            return self.suspended()
        return self.active()

    # ---- suspended --------------------------------------------------------------------------------
    def suspended(self) -> SyncResult:
        message = f"{self.info.kind} {self.ctx.name} is suspended."
        if is_true(self.conditions, c.RUNNING):
            self.condition(c.RUNNING, "False", "Suspended", message)
        self.condition(c.SUSPENDED, "True", "Suspended", message)
        # Kubeflow zeroes `active` in the replica statuses it has and adds none: a job created
        # suspended has no replicaStatuses at all.
        previous: Mapping[str, Json] = self.previous.get("replicaStatuses") or {}
        status = {**self.previous, "conditions": self.conditions}
        if previous:
            status["replicaStatuses"] = {
                rtype: _drop_zeros({**value, "active": 0}) for rtype, value in previous.items()
            }
        extras = clean(self.fw.extra_children(self.ctx, self.pods, active=False))
        return SyncResult(status=clean(status), children=extras)

    # ---- running ----------------------------------------------------------------------------------
    def active(self) -> SyncResult:
        status = dict(self.previous)
        if is_true(self.conditions, c.SUSPENDED):
            self.condition(c.SUSPENDED, "False", "Resumed", f"{self.info.kind} {self.ctx.name} is resumed.")
            status["startTime"] = self.stamp
        status.setdefault("startTime", self.stamp)
        restarts: dict[str, Json] = dict(status.get("podRestarts") or {})
        restarting, dropped, permanent = self._failed_pods(restarts)
        self.restarting = restarting
        self.exit_code_failures = [
            (rtype, pod) for rtype, pod in permanent if self.ctx.restart_policy(rtype) == "ExitCode"
        ]
        if restarts:
            status["podRestarts"] = restarts
        counts = self._counts()
        self._limits(status, restarts, restarting)
        self._evaluate(counts, restarting, permanent)
        if restarting:
            self.resync.append(self.ctx.settings.restart_resync_seconds)
        statuses = {rtype: self._replica_status(rtype, counts[rtype]) for rtype in self.ctx.replica_specs}
        if finished(self.conditions):
            status.setdefault("completionTime", self.stamp)
            return self.finished(self.fw.settled_statuses(self.ctx, statuses, self.pods), status)
        status.update(conditions=self.conditions, replicaStatuses=statuses)
        return SyncResult(
            status=clean(status),
            children=self._desired(dropped),
            resync_after_seconds=self._resync(),
        )

    def _rtype_of(self, pod: ObservedPod) -> str | None:
        label = pod.rtype_label
        return next((t for t in self.ctx.replica_specs if t.lower() == label), None)

    def _failed_pods(
        self, restarts: dict[str, Json]
    ) -> tuple[set[str], set[str], list[tuple[str, ObservedPod]]]:
        """Failed pods to recreate, the subset to delete now, and permanent failures.

        A failed pod is first recorded in status.podRestarts (once per pod uid, for backoffLimit) and
        deleted only by a later sync that sees that record come back: deleting it at once could let a
        sync reading a lagging cache (metacontroller.md §6 #5) recreate the pod without the record.
        """
        restarting: set[str] = set()
        dropped: set[str] = set()
        permanent: list[tuple[str, ObservedPod]] = []
        for pod in self.pods:
            rtype = self._rtype_of(pod)
            if rtype is None or pod.phase != "Failed" or pod.deleting:
                continue
            policy = self.ctx.restart_policy(rtype)
            code = pod.exit_code(self.fw.exit_code_container(self.ctx, rtype))
            retryable = policy != "ExitCode" or code is None or code >= RETRYABLE_EXIT_CODE
            if policy in self.fw.recreate_policies and retryable:
                restarting.add(pod.name)
                seen = restarts.get(pod.name) or {}
                if seen.get("uid") == pod.uid:
                    dropped.add(pod.name)
                else:
                    restarts[pod.name] = {
                        "count": int(seen.get("count") or 0) + 1 + pod.restart_count(),
                        "uid": pod.uid,
                    }
            else:
                permanent.append((rtype, pod))
        return restarting, dropped, permanent

    def _counts(self) -> dict[str, Counts]:
        tallies = {rtype: [0, 0, 0] for rtype in self.ctx.replica_specs}
        for pod in self.pods:
            rtype = self._rtype_of(pod)
            if rtype is None:
                continue
            if pod.phase == "Running":
                tallies[rtype][2 if pod.deleting else 0] += 1
            elif pod.phase == "Succeeded":
                tallies[rtype][1] += 1
            elif pod.phase == "Failed":
                tallies[rtype][2] += 1
        return {rtype: Counts(*t) for rtype, t in tallies.items()}

    def _limits(self, status: Json, restarts: Mapping[str, Json], restarting: set[str]) -> None:
        run_policy = self.ctx.run_policy
        limit = run_policy.get("backoffLimit")
        if limit is not None:
            in_place = sum(
                p.restart_count()
                for p in self.pods
                if not p.deleting
                and p.name not in restarting
                and (rtype := self._rtype_of(p)) is not None
                and self.ctx.restart_policy(rtype) in ("OnFailure", "Always", "ExitCode")
            )
            total = in_place + sum(int(r.get("count") or 0) for r in restarts.values())
            # backoffLimit N allows N restarts of any kind (in place or recreated), as a user reads a
            # batch/v1 Job's: the failure that would need restart N+1 fails the job.
            if total > limit:
                self.condition(
                    c.FAILED,
                    "True",
                    "Failed",
                    f"Job {self.ctx.name} has failed because it has reached the specified backoff limit",
                )
        deadline = run_policy.get("activeDeadlineSeconds")
        if deadline is not None:
            elapsed = (self.now - parse_timestamp(status["startTime"])).total_seconds()
            if elapsed >= deadline:
                self.condition(
                    c.FAILED,
                    "True",
                    "Failed",
                    f"Job {self.ctx.name} has failed because it was active longer than specified deadline",
                )
            else:
                self.resync.append(deadline - elapsed)

    def _evaluate(
        self, counts: dict[str, Counts], restarting: set[str], permanent: list[tuple[str, ObservedPod]]
    ) -> None:
        leaders = self.fw.leader_types(self.ctx)
        if any(counts[t].active > 0 for t in leaders):
            self.condition(c.RUNNING, "True", "Running", self.fw.running_message(self.ctx))
        if self.fw.succeeded(self.ctx, counts, self.pods):
            self.condition(c.SUCCEEDED, "True", "Succeeded", self.fw.succeeded_message(self.ctx))
            return
        by_type: dict[str, int] = {}
        for pod in self.pods:
            rtype = self._rtype_of(pod)
            if pod.name in restarting and rtype:
                by_type[rtype] = by_type.get(rtype, 0) + 1
        for rtype, n in by_type.items():
            self.condition(
                c.RESTARTING,
                "True",
                "Restarting",
                f"{self.info.kind} {self.ctx.name} is restarting because {n} {rtype} replica(s) failed.",
            )
        failing: dict[str, int] = {}
        for rtype, _pod in permanent:
            if not self.fw.tolerates_failure(self.ctx, rtype):
                failing[rtype] = failing.get(rtype, 0) + 1
        for rtype in self.ctx.replica_specs:
            if rtype in failing:
                if self.ctx.restart_policy(rtype) == "ExitCode":
                    message = f'job "{self.ctx.name}" is failing because "{rtype}" replica(s) failed.'
                    reason = "Failed"
                else:
                    message = self.fw.failed_message(self.ctx, rtype, failing[rtype])
                    reason = self.fw.failed_reason
                self.condition(c.FAILED, "True", reason, message)
                return

    def _replica_status(self, rtype: str, counts: Counts) -> Json:
        out: Json = _drop_zeros(
            {"active": counts.active, "succeeded": counts.succeeded, "failed": counts.failed}
        )
        if self.info.scalable:
            out["selector"] = build.selector(self.ctx, rtype)
        return out

    def _desired(self, dropped: set[str]) -> list[Json]:
        ctx, fw = self.ctx, self.fw
        gang = ctx.settings.gang_scheduler
        group_key = podgroups.child_key(gang) if gang else ""
        observed_group = next(iter(objects(self.children, group_key)), None) if gang else None
        hold = bool(gang) and podgroups.holds_pods(ctx, observed_group)
        existing = {p.name for p in self.pods}
        out: list[Json] = []
        for rtype in ctx.replica_specs:
            for index in range(ctx.replicas(rtype)):
                name = self.info.pod_name(ctx.name, rtype, index)
                waiting = name not in existing and (hold or fw.waits_for(ctx, rtype, self.children))
                if name not in dropped and not waiting:
                    pod = build.pod(ctx, fw, rtype, index)
                    if gang:
                        podgroups.decorate_pod(ctx, rtype, pod)
                    out.append(pod)
                # Volcano admits the gang first: until then Kubeflow creates neither pods nor services.
                if fw.has_services and not (hold and name not in existing):
                    out.append(build.service(ctx, rtype, index))
        out += clean(fw.extra_children(ctx, self.pods, active=True))
        if gang:
            out.append(podgroups.pod_group(ctx, observed_group))
        return out

    def _resync(self) -> float | None:
        return round(min(self.resync), 3) if self.resync else None

    # ---- finished ---------------------------------------------------------------------------------
    def finished(self, statuses: Json, status: Json) -> SyncResult:
        if is_true(self.conditions, c.SUCCEEDED):
            # Replicas still running when the job succeeded are reported as succeeded (Kubeflow).
            statuses = {
                rtype: _drop_zeros(
                    {
                        **value,
                        "succeeded": int(value.get("succeeded") or 0) + int(value.get("active") or 0),
                        "active": 0,
                    }
                )
                for rtype, value in statuses.items()
            }
        status = clean({**status, "conditions": self.conditions, "replicaStatuses": statuses})
        # Clean up only once Metacontroller sends the finished status back. The sync that finishes the job
        # keeps every pod: were they deleted now, a sync triggered by their deletion could read the job's
        # pre-finish status from a lagging cache (metacontroller.md §6 #5), find no pods and run it again.
        settled = finished(list(self.previous.get("conditions") or []))
        kept = self._kept_pods() if settled else list(self.pods)
        kept_names = {p.name for p in kept}
        policy = self.ctx.run_policy.get("cleanPodPolicy")
        observed_services = objects(self.children, SERVICE)
        services = [
            _as_desired(s)
            for s in observed_services
            if policy == "None" or not settled or s["metadata"]["name"] in kept_names
        ]
        desired = [_as_desired(p.obj) for p in kept] + services
        desired += self._unchanged(clean(self.fw.extra_children(self.ctx, self.pods, active=False)))
        resync, expired = self._ttl(status)
        if not settled and len(self._kept_pods()) < len(self.pods):
            cleanup = self.ctx.settings.restart_resync_seconds
            resync = cleanup if resync is None else min(resync, cleanup)
        return SyncResult(status=status, children=desired, resync_after_seconds=resync, delete_parent=expired)

    def _unchanged(self, computed: list[Json]) -> list[Json]:
        """A finished job's children as they were last applied: finishing writes no child (an MPI
        hostfile listing no running worker would otherwise be an Update)."""
        observed = {
            (o.get("kind"), o["metadata"]["name"]): o
            for group in self.children.values()
            for o in group.values()
        }
        out = []
        for obj in computed:
            current = observed.get((obj["kind"], obj["metadata"]["name"]))
            out.append(_as_desired(current) if current is not None else obj)
        return out

    def _kept_pods(self) -> list[ObservedPod]:
        policy = self.ctx.run_policy.get("cleanPodPolicy")
        if policy == "All":
            return []
        if policy == "Running":
            return [p for p in self.pods if p.phase not in ("Running", "Pending")]
        return list(self.pods)

    def _ttl(self, status: Json) -> tuple[float | None, bool]:
        ttl = self.ctx.run_policy.get("ttlSecondsAfterFinished")
        completed = status.get("completionTime")
        if ttl is None or not completed or self.ctx.suspended:
            return None, False
        remaining = (parse_timestamp(completed) - self.now).total_seconds() + ttl
        if remaining <= 0:
            return None, True
        return round(remaining, 3), False


def _drop_zeros(counts: Json) -> Json:
    # Kubeflow's ReplicaStatus fields are `omitempty`: zero counts are absent, not 0.
    return {k: v for k, v in counts.items() if v not in (0, None)}


def _as_desired(obj: Json) -> Json:
    """An observed child returned exactly as it was last applied, so that Metacontroller's three-way
    merge finds nothing to change and writes nothing.

    Metacontroller stores what it applied in its last-applied annotation; returning the observed object
    instead (with server-filled fields such as a Service's clusterIPs) would differ from it and cost one
    Update per child. A child without the annotation (created by someone else) comes back with only the
    fields we own.
    """
    meta = obj.get("metadata") or {}
    applied = _last_applied(obj)
    if applied is not None:
        return applied
    out_meta = {k: meta[k] for k in ("name", "namespace", "labels") if meta.get(k)}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        out_meta["annotations"] = annotations
    out = {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind"), "metadata": out_meta}
    if "spec" in obj:
        out["spec"] = obj["spec"]
    return out


def _last_applied(obj: Json) -> Json | None:
    """The object Metacontroller last applied, if its annotation holds this very object."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not isinstance(raw, str):
        return None
    try:
        applied = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(applied, dict) or not isinstance(applied.get("metadata"), dict):
        return None
    same = (
        applied.get("kind") == obj.get("kind") and applied["metadata"].get("name") == obj["metadata"]["name"]
    )
    return clean(applied) if same else None
