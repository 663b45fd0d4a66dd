"""Decide: from what a sync observed to the job's new status, with the facts the later steps need.

The status is a function of the observed children and the previous status alone, with `now` used only
for transition times, so a resync of an unchanged job decides a byte-identical status and Metacontroller
writes nothing. Conditions follow Kubeflow's rules (trainop.job.conditions): Succeeded and Failed are
terminal, and the first of them set in a sync is the one that stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from trainop.api import constants as c
from trainop.api.jsonvalues import clean
from trainop.api.times import parse_timestamp
from trainop.controller.children import selector
from trainop.controller.observe import Observation
from trainop.extensions.base import ReplicaFailure
from trainop.frameworks.base import Counts
from trainop.job.conditions import find, finished, is_true, set_condition
from trainop.job.mounts import NOT_OWNED, report
from trainop.job.observed import ObservedPod
from trainop.jsontypes import Json

# Containers killed by a signal exit with 128 + signal; Kubeflow retries those under ExitCode.
RETRYABLE_EXIT_CODE = 128
# Restart policies under which kubelet restarts a container in place; backoffLimit counts those restarts.
IN_PLACE_POLICIES = ("OnFailure", "Always", "ExitCode")


class Phase(Enum):
    ACTIVE = "active"
    SUSPENDED = "suspended"
    FINISHED = "finished"


class Failure(Enum):
    """Why this sync failed the job; events and metrics read this, never the condition's message."""

    VALIDATION = "validation"
    BACKOFF_LIMIT = "backoff-limit"
    DEADLINE = "deadline"
    # Replicas failed permanently under a policy that does not recreate them.
    REPLICAS = "replicas"
    # Replicas failed with a permanent exit code under restartPolicy ExitCode.
    EXIT_CODE = "exit-code"


@dataclass(frozen=True)
class Decision:
    phase: Phase
    status: Json
    # Failed pods being recreated, and of those the ones to delete in this sync (their restart is
    # recorded in status.podRestarts already).
    restarting: frozenset[str] = frozenset()
    dropped: frozenset[str] = frozenset()
    # (replica type, pod) that failed for good under restartPolicy ExitCode.
    exit_code_failures: tuple[tuple[str, ObservedPod], ...] = ()
    # Set when this sync turned the job Failed.
    failure: Failure | None = None
    # When an active job needs another look even if nothing changes (restarts, activeDeadlineSeconds).
    resync_after_seconds: float | None = None
    # Finished, and the finished status has come back from Metacontroller: cleanup may start.
    settled: bool = False

    @property
    def conditions(self) -> list[Json]:
        return list(self.status.get("conditions") or [])


def decide(obs: Observation) -> Decision:
    conditions = obs.previous_conditions
    if find(conditions, c.CREATED) is None:
        kind, name = obs.ctx.info.kind, obs.ctx.name
        conditions = _set(obs, conditions, c.CREATED, "True", "Created", f"{kind} {name} is created.")
    if finished(conditions):
        return _finished(obs, conditions, dict(obs.previous.get("replicaStatuses") or {}), obs.previous)
    if obs.ctx.suspended:
        return _suspended(obs, conditions)
    return _active(obs, conditions)


def decide_invalid(kind: str, previous: Json, message: str, stamp: str) -> Decision:
    """A job that bypassed validation: Failed with the webhook's message, its completion time kept."""
    before = list(previous.get("conditions") or [])
    reason = f"{kind}FailedValidation"
    conditions = set_condition(before, c.FAILED, "True", reason, message, stamp)
    status = {**previous, "conditions": conditions}
    status.setdefault("completionTime", stamp)
    failure = None if conditions is before else Failure.VALIDATION
    return Decision(phase=Phase.FINISHED, status=status, failure=failure)


def _set(
    obs: Observation, conditions: list[Json], ctype: str, status: str, reason: str, message: str
) -> list[Json]:
    return set_condition(conditions, ctype, status, f"{obs.ctx.info.kind}{reason}", message, obs.stamp)


# ---- suspended -----------------------------------------------------------------------------------
def _suspended(obs: Observation, conditions: list[Json]) -> Decision:
    message = f"{obs.ctx.info.kind} {obs.ctx.name} is suspended."
    if is_true(conditions, c.RUNNING):
        conditions = _set(obs, conditions, c.RUNNING, "False", "Suspended", message)
    conditions = _set(obs, conditions, c.SUSPENDED, "True", "Suspended", message)
    # Kubeflow zeroes `active` in the replica statuses it has and adds none: a job created suspended
    # has no replicaStatuses at all.
    previous: Mapping[str, Json] = obs.previous.get("replicaStatuses") or {}
    status = {**obs.previous, "conditions": conditions}
    if previous:
        status["replicaStatuses"] = {
            rtype: drop_zeros({**value, "active": 0}) for rtype, value in previous.items()
        }
    return Decision(phase=Phase.SUSPENDED, status=clean(status))


# ---- active --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _FailedPods:
    restarting: frozenset[str]
    dropped: frozenset[str]
    permanent: tuple[tuple[str, ObservedPod], ...]
    # status.podRestarts with this sync's new restarts recorded.
    restarts: Mapping[str, Json]


def _active(obs: Observation, conditions: list[Json]) -> Decision:
    ctx = obs.ctx
    status = dict(obs.previous)
    if is_true(conditions, c.SUSPENDED):
        message = f"{ctx.info.kind} {ctx.name} is resumed."
        conditions = _set(obs, conditions, c.SUSPENDED, "False", "Resumed", message)
        status["startTime"] = obs.stamp
    status.setdefault("startTime", obs.stamp)
    failed = _failed_pods(obs, dict(status.get("podRestarts") or {}))
    if failed.restarts:
        status["podRestarts"] = dict(failed.restarts)
    exit_code_failures = tuple(
        (rtype, pod) for rtype, pod in failed.permanent if ctx.restart_policy(rtype) == "ExitCode"
    )
    counts = _counts(obs)
    conditions, failure, deadline_left = _limits(obs, conditions, status["startTime"], failed)
    if not finished(conditions):
        conditions, failure = _evaluate(obs, conditions, counts, failed)
        conditions = _not_owned(obs, conditions)
    resync = [left for left in (deadline_left,) if left is not None]
    if failed.restarting:
        resync.append(ctx.settings.restart_resync_seconds)
    statuses = {rtype: _replica_status(obs, rtype, counts[rtype]) for rtype in ctx.replica_specs}
    if finished(conditions):
        status.setdefault("completionTime", obs.stamp)
        return _finished(
            obs,
            conditions,
            obs.fw.settled_statuses(ctx, statuses, obs.pods),
            status,
            restarting=failed.restarting,
            dropped=failed.dropped,
            exit_code_failures=exit_code_failures,
            failure=failure,
        )
    status.update(conditions=conditions, replicaStatuses=statuses)
    return Decision(
        phase=Phase.ACTIVE,
        status=clean(status),
        restarting=failed.restarting,
        dropped=failed.dropped,
        exit_code_failures=exit_code_failures,
        resync_after_seconds=round(min(resync), 3) if resync else None,
    )


def _failed_pods(obs: Observation, restarts: dict[str, Json]) -> _FailedPods:
    """Failed pods to recreate, the subset to delete now, and permanent failures.

    A failed pod is first recorded in status.podRestarts (once per pod uid, for backoffLimit) and
    deleted only by a later sync that sees that record come back: deleting it at once could let a
    sync reading a lagging cache (docs/design.md#lagging-parent-cache) recreate the pod without the record.
    """
    restarting: set[str] = set()
    dropped: set[str] = set()
    permanent: list[tuple[str, ObservedPod]] = []
    for pod in obs.pods:
        rtype = obs.rtype_of(pod)
        if rtype is None or pod.phase != "Failed" or pod.deleting:
            continue
        policy = obs.ctx.restart_policy(rtype)
        code = pod.exit_code(obs.fw.exit_code_container(obs.ctx, rtype))
        retryable = policy != "ExitCode" or code is None or code >= RETRYABLE_EXIT_CODE
        if policy in obs.fw.recreate_policies and retryable:
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
    return _FailedPods(frozenset(restarting), frozenset(dropped), tuple(permanent), restarts)


def _counts(obs: Observation) -> dict[str, Counts]:
    tallies = {rtype: [0, 0, 0] for rtype in obs.ctx.replica_specs}
    for pod in obs.pods:
        rtype = obs.rtype_of(pod)
        if rtype is None:
            continue
        if pod.phase == "Running":
            tallies[rtype][2 if pod.deleting else 0] += 1
        elif pod.phase == "Succeeded":
            tallies[rtype][1] += 1
        elif pod.phase == "Failed":
            tallies[rtype][2] += 1
    return {rtype: Counts(*t) for rtype, t in tallies.items()}


def _limits(
    obs: Observation, conditions: list[Json], start_time: str, failed: _FailedPods
) -> tuple[list[Json], Failure | None, float | None]:
    """backoffLimit and activeDeadlineSeconds: the conditions, why the job failed, when the deadline is."""
    ctx = obs.ctx
    run_policy = ctx.run_policy
    failure: Failure | None = None
    limit = run_policy.get("backoffLimit")
    if limit is not None:
        in_place = sum(
            p.restart_count()
            for p in obs.pods
            if not p.deleting
            and p.name not in failed.restarting
            and (rtype := obs.rtype_of(p)) is not None
            and ctx.restart_policy(rtype) in IN_PLACE_POLICIES
        )
        total = in_place + sum(int(r.get("count") or 0) for r in failed.restarts.values())
        # backoffLimit N allows N restarts of any kind (in place or recreated), as a user reads a
        # batch/v1 Job's: the failure that would need restart N+1 fails the job.
        if total > limit:
            message = f"Job {ctx.name} has failed because it has reached the specified backoff limit"
            conditions = _set(obs, conditions, c.FAILED, "True", "Failed", message)
            failure = Failure.BACKOFF_LIMIT
    deadline = run_policy.get("activeDeadlineSeconds")
    left: float | None = None
    if deadline is not None:
        elapsed = (obs.now - parse_timestamp(start_time)).total_seconds()
        if elapsed >= deadline:
            message = f"Job {ctx.name} has failed because it was active longer than specified deadline"
            before = conditions
            conditions = _set(obs, conditions, c.FAILED, "True", "Failed", message)
            if failure is None and conditions is not before:
                failure = Failure.DEADLINE
        else:
            left = deadline - elapsed
    return conditions, failure, left


def _evaluate(
    obs: Observation, conditions: list[Json], counts: dict[str, Counts], failed: _FailedPods
) -> tuple[list[Json], Failure | None]:
    """Running, Succeeded, Restarting and replica failures, for a job no limit has failed."""
    ctx, fw = obs.ctx, obs.fw
    if any(counts[t].active > 0 for t in fw.leader_types(ctx)):
        conditions = _set(obs, conditions, c.RUNNING, "True", "Running", fw.running_message(ctx))
    if fw.succeeded(ctx, counts, obs.pods):
        return _set(obs, conditions, c.SUCCEEDED, "True", "Succeeded", fw.succeeded_message(ctx)), None
    by_type: dict[str, int] = {}
    for pod in obs.pods:
        rtype = obs.rtype_of(pod)
        if pod.name in failed.restarting and rtype:
            by_type[rtype] = by_type.get(rtype, 0) + 1
    for rtype, n in by_type.items():
        message = f"{ctx.info.kind} {ctx.name} is restarting because {n} {rtype} replica(s) failed."
        conditions = _set(obs, conditions, c.RESTARTING, "True", "Restarting", message)
    failing: dict[str, int] = {}
    for rtype, _pod in failed.permanent:
        if not fw.tolerates_failure(ctx, rtype):
            failing[rtype] = failing.get(rtype, 0) + 1
    for rtype in ctx.replica_specs:
        if rtype not in failing:
            continue
        cause = _cause(obs, rtype, failed)
        if ctx.restart_policy(rtype) == "ExitCode":
            message = f'job "{ctx.name}" is failing because "{rtype}" replica(s) failed.' + cause
            conditions = _set(obs, conditions, c.FAILED, "True", "Failed", message)
            return conditions, Failure.EXIT_CODE
        message = fw.failed_message(ctx, rtype, failing[rtype]) + cause
        return _set(obs, conditions, c.FAILED, "True", fw.failed_reason, message), Failure.REPLICAS
    return conditions, None


def _not_owned(obs: Observation, conditions: list[Json]) -> list[Json]:
    """Running False with reason <Kind>ConfigMapNotOwned while another object holds the name of a
    ConfigMap the job's pods run (trainop.job.mounts), naming it and what to do; removed once none does,
    so the job's conditions are Kubeflow's again. A job already Running or Restarting keeps that
    condition (its existing pods run): the Warning Event reports it then."""
    ctx = obs.ctx
    reason = f"{ctx.info.kind}{NOT_OWNED}"
    current = find(conditions, c.RUNNING)
    ours = current is not None and current.get("reason") == reason
    if not obs.foreign:
        return [x for x in conditions if x is not current] if ours else conditions
    if not ours and (is_true(conditions, c.RUNNING) or is_true(conditions, c.RESTARTING)):
        return conditions
    message = " ".join(report(m, ctx.info.kind, ctx.namespace, ctx.name) for m in obs.foreign)
    if current is not None and ours:
        if current.get("message") == message:
            return conditions
        return [
            {**x, "message": message, "lastUpdateTime": obs.stamp} if x is current else x for x in conditions
        ]
    return _set(obs, conditions, c.RUNNING, "False", NOT_OWNED, message)


def _cause(obs: Observation, rtype: str, failed: _FailedPods) -> str:
    """What our extensions know of why the replicas failed (" <sentence>", or "" for Kubeflow's message
    alone): only a job with our annotations can get one."""
    container = obs.fw.exit_code_container(obs.ctx, rtype)
    failures = [
        ReplicaFailure(rtype, pod.name, pod.exit_code(container)) for t, pod in failed.permanent if t == rtype
    ]
    cause = obs.extensions.explain_failures(obs.ctx, failures)
    return f" {cause}" if cause else ""


def _replica_status(obs: Observation, rtype: str, counts: Counts) -> Json:
    out: Json = drop_zeros({"active": counts.active, "succeeded": counts.succeeded, "failed": counts.failed})
    if obs.ctx.info.scalable:
        out["selector"] = selector(obs.ctx, rtype)
    return out


# ---- finished ------------------------------------------------------------------------------------
def _finished(
    obs: Observation,
    conditions: list[Json],
    statuses: Json,
    status: Json,
    *,
    restarting: frozenset[str] = frozenset(),
    dropped: frozenset[str] = frozenset(),
    exit_code_failures: tuple[tuple[str, ObservedPod], ...] = (),
    failure: Failure | None = None,
) -> Decision:
    if is_true(conditions, c.SUCCEEDED):
        # Replicas still running when the job succeeded are reported as succeeded (Kubeflow).
        statuses = {
            rtype: drop_zeros(
                {
                    **value,
                    "succeeded": int(value.get("succeeded") or 0) + int(value.get("active") or 0),
                    "active": 0,
                }
            )
            for rtype, value in statuses.items()
        }
    return Decision(
        phase=Phase.FINISHED,
        status=clean({**status, "conditions": conditions, "replicaStatuses": statuses}),
        restarting=restarting,
        dropped=dropped,
        exit_code_failures=exit_code_failures,
        failure=failure,
        settled=finished(obs.previous_conditions),
    )


def drop_zeros(counts: Json) -> Json:
    # Kubeflow's ReplicaStatus fields are `omitempty`: zero counts are absent, not 0.
    return {k: v for k, v in counts.items() if v not in (0, None)}
