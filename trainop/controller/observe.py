"""Observe: the first step of a sync, what it sees of one admitted job, as one immutable value."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from trainop.api.times import timestamp
from trainop.extensions import Resolved
from trainop.frameworks import framework
from trainop.frameworks.base import Framework
from trainop.job.context import JobContext
from trainop.job.mounts import Check, Standing, check
from trainop.job.observed import Children, ObservedPod, pods_of
from trainop.job.settings import Settings
from trainop.jsontypes import Json


@dataclass(frozen=True)
class Observation:
    ctx: JobContext
    fw: Framework
    # The extensions admission resolved for the job, with their values.
    extensions: Resolved
    children: Children
    # The pods this job controls, sorted by name.
    pods: tuple[ObservedPod, ...]
    # The status Metacontroller sent, without the observedGeneration it adds itself.
    previous: Json
    now: datetime
    # The ConfigMaps the job's pods run (the framework's, then the extensions'), each as observed.
    mounts: tuple[Check, ...] = ()

    @property
    def foreign(self) -> tuple[Check, ...]:
        """The mounted ConfigMaps whose name another object holds: the pods mounting them wait."""
        return tuple(m for m in self.mounts if m.standing is Standing.FOREIGN)

    def mount_blocks(self, rtype: str) -> bool:
        """Whether a pod of `rtype` that does not exist yet must wait for a ConfigMap it runs."""
        return any(m.blocks(rtype) for m in self.mounts)

    @property
    def stamp(self) -> str:
        return timestamp(self.now)

    @property
    def previous_conditions(self) -> list[Json]:
        return list(self.previous.get("conditions") or [])

    def rtype_of(self, pod: ObservedPod) -> str | None:
        """The canonical replica type a pod's label names, if the job has it."""
        label = pod.rtype_label
        return next((t for t in self.ctx.replica_specs if t.lower() == label), None)


def previous_status(parent: Json) -> Json:
    return {k: v for k, v in (parent.get("status") or {}).items() if k != "observedGeneration"}


def observe(
    job: Json,
    extensions: Resolved,
    parent: Json,
    children: Children,
    settings: Settings,
    now: datetime,
    related: Children | None = None,
) -> Observation:
    """`job` is the admitted (defaulted, valid) form of `parent`, the object Metacontroller sent, and
    `extensions` what admission resolved for it. `related` holds the objects the customize hook asked
    Metacontroller for (same-named ConfigMaps the job may not own)."""
    fw = framework(str(job["kind"]))
    ctx = JobContext(fw.info, job, settings)
    uid = str(job["metadata"].get("uid") or "")
    mounted = (*fw.mounts(ctx), *extensions.mounts(ctx))
    return Observation(
        ctx=ctx,
        fw=fw,
        extensions=extensions,
        children=children,
        pods=tuple(pods_of(children, uid)),
        previous=previous_status(parent),
        now=now,
        mounts=tuple(check(m, uid, ctx.namespace, children, related or {}) for m in mounted),
    )
