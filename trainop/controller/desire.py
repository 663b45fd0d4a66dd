"""Desire: the children a decided job should have, and whether its TTL asks for a resync or its deletion.

Pods and headless Services come from trainop.controller.children, a framework's extra children from the
framework, PodGroups from trainop.controller.podgroups, and the children of our extensions (a
TensorBoard) from the extensions admission resolved. A finished job returns its remaining children as
they were last applied, so finishing writes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from trainop.api.jsonvalues import clean
from trainop.api.times import parse_timestamp
from trainop.controller import children as build
from trainop.controller import podgroups
from trainop.controller.decide import Decision, Phase
from trainop.controller.observe import Observation
from trainop.controller.ttl import remaining, ttl_seconds
from trainop.extensions.base import COMPONENT_LABEL, JobState
from trainop.job.observed import SERVICE, ObservedPod, objects
from trainop.jsontypes import Json

LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"


@dataclass(frozen=True)
class Desired:
    children: list[Json]
    resync_after_seconds: float | None = None
    # ttlSecondsAfterFinished has expired: the caller deletes the job (a hook cannot delete its parent).
    delete_parent: bool = False


def desire(obs: Observation, decision: Decision) -> Desired:
    desired = _framework(obs, decision)
    addons = obs.extensions.children(obs.ctx, _state(decision, obs.now))
    if not addons.children and addons.resync_after_seconds is None:
        return desired
    resync = [r for r in (desired.resync_after_seconds, addons.resync_after_seconds) if r is not None]
    return replace(
        desired,
        children=[*desired.children, *clean(list(addons.children))],
        resync_after_seconds=min(resync) if resync else None,
    )


def _framework(obs: Observation, decision: Decision) -> Desired:
    if decision.phase is Phase.SUSPENDED:
        return Desired(clean(obs.fw.extra_children(obs.ctx, obs.pods, active=False)))
    if decision.phase is Phase.FINISHED:
        return _finished(obs, decision)
    return Desired(_active(obs, decision), decision.resync_after_seconds)


def _state(decision: Decision, now: datetime) -> JobState:
    completed = decision.status.get("completionTime") if decision.phase is Phase.FINISHED else None
    return JobState(finished_at=parse_timestamp(str(completed)) if completed else None, now=now)


def desire_invalid(run_policy: Any, decision: Decision, now: datetime) -> Desired:
    """No children for a job that bypassed validation; its TTL still applies."""
    resync, expired = _ttl(ttl_seconds(run_policy), decision.status.get("completionTime"), now)
    return Desired([], resync, expired)


def _active(obs: Observation, decision: Decision) -> list[Json]:
    ctx, fw = obs.ctx, obs.fw
    gang = ctx.settings.gang_scheduler
    group_key = podgroups.child_key(gang) if gang else ""
    observed_group = next(iter(objects(obs.children, group_key)), None) if gang else None
    hold = bool(gang) and podgroups.holds_pods(ctx, observed_group)
    existing = {p.name for p in obs.pods}
    out: list[Json] = []
    for rtype in ctx.replica_specs:
        for index in range(ctx.replicas(rtype)):
            name = ctx.info.pod_name(ctx.name, rtype, index)
            waiting = name not in existing and (
                hold or fw.waits_for(ctx, rtype, obs.children) or obs.mount_blocks(rtype)
            )
            if name not in decision.dropped and not waiting:
                pod = build.pod(ctx, fw, obs.extensions, rtype, index)
                if gang:
                    pod = podgroups.decorate_pod(ctx, rtype, pod)
                out.append(pod)
            # Volcano admits the gang first: until then Kubeflow creates neither pods nor services.
            if fw.has_services and not (hold and name not in existing):
                out.append(build.service(ctx, rtype, index))
    out += clean(fw.extra_children(ctx, obs.pods, active=True))
    if gang:
        out.append(podgroups.pod_group(ctx, observed_group))
    return out


def _finished(obs: Observation, decision: Decision) -> Desired:
    # Clean up only once Metacontroller sends the finished status back. The sync that finishes the job
    # keeps every pod: were they deleted now, a sync triggered by their deletion could read the job's
    # pre-finish status from a lagging cache (docs/design.md#lagging-parent-cache), find no pods and
    # run it again.
    kept = _kept_pods(obs) if decision.settled else list(obs.pods)
    kept_names = {p.name for p in kept}
    policy = obs.ctx.run_policy.get("cleanPodPolicy")
    services = [
        as_desired(s)
        for s in objects(obs.children, SERVICE)
        if COMPONENT_LABEL not in (s["metadata"].get("labels") or {})  # an extension's: it decides
        and (policy == "None" or not decision.settled or s["metadata"]["name"] in kept_names)
    ]
    children = [as_desired(p.obj) for p in kept] + services
    extra = clean(obs.fw.extra_children(obs.ctx, obs.pods, active=False))
    children += _unchanged(obs, extra)
    ttl = None if obs.ctx.suspended else ttl_seconds(obs.ctx.run_policy)
    resync, expired = _ttl(ttl, decision.status.get("completionTime"), obs.now)
    if not decision.settled and len(_kept_pods(obs)) < len(obs.pods):
        cleanup = obs.ctx.settings.restart_resync_seconds
        resync = cleanup if resync is None else min(resync, cleanup)
    return Desired(children, resync, expired)


def _ttl(ttl: int | None, completed: Any, now: datetime) -> tuple[float | None, bool]:
    """(when to resync for the TTL, whether it has expired)."""
    if ttl is None or not completed:
        return None, False
    left = remaining(ttl, str(completed), now)
    if left <= 0:
        return None, True
    return round(left, 3), False


def _kept_pods(obs: Observation) -> list[ObservedPod]:
    policy = obs.ctx.run_policy.get("cleanPodPolicy")
    if policy == "All":
        return []
    if policy == "Running":
        return [p for p in obs.pods if p.phase not in ("Running", "Pending")]
    return list(obs.pods)


def _unchanged(obs: Observation, computed: list[Json]) -> list[Json]:
    """A finished job's children as they were last applied: finishing writes no child (an MPI
    hostfile listing no running worker would otherwise be an Update)."""
    observed = {
        (o.get("kind"), o["metadata"]["name"]): o for group in obs.children.values() for o in group.values()
    }
    out = []
    for obj in computed:
        current = observed.get((obj["kind"], obj["metadata"]["name"]))
        out.append(as_desired(current) if current is not None else obj)
    return out


def as_desired(obj: Json) -> Json:
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
