"""The Kubernetes Events a sync implies, as data: Kubeflow's reasons, messages and types, derived from the
status the hook received versus the one it decided and from the children it observed versus desires.

Every event is bounded (trainop.job.event); one whose reason is not a word is not implied at all. Each
event carries an `occurrence` (trainop.job.event), so a retried or lagging sync implies the same
event again and the recorder writes nothing, while a genuinely new happening is counted. Where
Kubeflow's controllers differ per kind, the framework says how (trainop.frameworks.base).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainop.api import constants as c
from trainop.controller.decide import Decision, Failure
from trainop.controller.observe import Observation
from trainop.frameworks.base import Framework
from trainop.job.conditions import find, finished
from trainop.job.context import JobContext
from trainop.job.event import NORMAL, WARNING, Event, well_formed
from trainop.job.mounts import NOT_OWNED, report
from trainop.job.observed import SERVICE, Children, ObservedPod
from trainop.jsontypes import Json


@dataclass(frozen=True)
class SyncFacts:
    """What one sync saw, decided and desires, as far as events are concerned."""

    obs: Observation
    decision: Decision
    desired: Sequence[Json]

    @property
    def ctx(self) -> JobContext:
        return self.obs.ctx

    @property
    def fw(self) -> Framework:
        return self.obs.fw

    @property
    def children(self) -> Children:
        return self.obs.children

    @property
    def pods(self) -> Sequence[ObservedPod]:
        return self.obs.pods

    @property
    def previous(self) -> Json:
        """The status received."""
        return self.obs.previous

    @property
    def status(self) -> Json:
        """The status decided."""
        return self.decision.status


def derive(obs: Observation, decision: Decision, desired: Sequence[Json]) -> list[Event]:
    """Every event this sync implies, in the order Kubeflow would record them."""
    facts = SyncFacts(obs, decision, desired)
    before = list(facts.previous.get("conditions") or [])
    after = list(facts.status.get("conditions") or [])
    out = list(_suspension(facts, before, after))
    if not finished(before) and not facts.ctx.suspended:
        out += _abnormal_pods(facts.pods)
        out += facts.fw.active_events(facts.ctx, facts.children, facts.pods)
        out += _not_owned(facts)
        if facts.fw.reports_pod_outcomes:
            out += _pod_outcomes(facts)
    out += _children(facts)
    out += _conclusions(facts, before, after)
    return well_formed(out)


def invalid(kind: str, message: str) -> Event:
    return Event(WARNING, f"{kind}FailedValidation", message, "invalid", False, validation=True)


def deleted_job(fw: Framework, name: str) -> Event:
    """Kubeflow's DeleteJob event, recorded once the job's ttlSecondsAfterFinished has expired."""
    return Event(NORMAL, fw.deleted_job_reason, f"Deleted job: {name}", "deleted", False)


# ---- conditions ---------------------------------------------------------------------------------
def _became(before: list[Json], after: list[Json], ctype: str, status: str) -> str | None:
    """The transition time of `ctype` turning `status` in this sync, or None if it did not."""
    new = find(after, ctype)
    if not new or new.get("status") != status:
        return None
    old = find(before, ctype)
    if old and old.get("status") == status and old.get("reason") == new.get("reason"):
        return None
    return str(new.get("lastTransitionTime") or "")


def _suspension(facts: SyncFacts, before: list[Json], after: list[Json]) -> Iterable[Event]:
    kind, name = facts.ctx.info.kind, facts.ctx.name
    suspended = _became(before, after, c.SUSPENDED, "True")
    if suspended is not None:
        message = f"{kind} {name} is suspended."
        yield Event(NORMAL, f"{kind}Suspended", message, f"suspended@{suspended}", False)
    resumed = _became(before, after, c.SUSPENDED, "False")
    if resumed is not None:
        start = facts.status.get("startTime")
        yield Event(NORMAL, f"{kind}Resumed", f"{kind} {name} is resumed.", f"resumed@{start}", False)


def _conclusions(facts: SyncFacts, before: list[Json], after: list[Json]) -> Iterable[Event]:
    kind, ctx = facts.ctx.info.kind, facts.ctx
    if not finished(before):
        yield from _kind_restarting(facts, after)
    succeeded = _became(before, after, c.SUCCEEDED, "True")
    if succeeded is not None:
        message = str((find(after, c.SUCCEEDED) or {}).get("message"))
        yield from facts.fw.succeeded_events(ctx)
        yield Event(NORMAL, f"{kind}Succeeded", message, "succeeded", False)
    failed = _became(before, after, c.FAILED, "True")
    if failed is not None:
        if facts.decision.failure is Failure.EXIT_CODE:
            return  # recorded per pod as a Warning, with the pods' outcomes
        message = str((find(after, c.FAILED) or {}).get("message"))
        yield from facts.fw.failed_events(ctx, facts.pods)
        yield Event(NORMAL, f"{kind}Failed", message, "failed", False)


def _kind_restarting(facts: SyncFacts, after: list[Json]) -> Iterable[Event]:
    """The Restarting Warning of a kind's UpdateJobStatus, per replica type with failed pods under a
    restarting policy: pods being recreated, and (Kubeflow reads only the policy, not the exit code)
    pods an ExitCode policy leaves failed for good. One occurrence per set of failed pods."""
    ctx, kind = facts.ctx, facts.ctx.info.kind
    if not facts.fw.warns_restarting:
        return
    # A job finishing in this sync for another reason (success, backoffLimit) stops recreating pods.
    recreated = frozenset() if finished(after) else facts.decision.restarting
    failing = {p.uid for _, p in facts.decision.exit_code_failures}
    for rtype in ctx.replica_specs:
        own = [p for p in facts.pods if p.rtype_label == rtype.lower()]
        failed = sorted(p.uid for p in own if p.name in recreated or p.uid in failing)
        if not failed:
            continue
        if facts.fw.warns_restarting_only_when_short:
            up = sum(1 for p in own if p.phase == "Succeeded" or (p.phase == "Running" and not p.deleting))
            if ctx.replicas(rtype) <= up:
                continue
        message = f"{kind} {ctx.name} is restarting because {len(failed)} {rtype} replica(s) failed."
        yield Event(WARNING, f"{kind}Restarting", message, "restart:" + ",".join(failed), False)


def _not_owned(facts: SyncFacts) -> Iterable[Event]:
    """A Warning per ConfigMap the job's pods run whose name another object holds (trainop.job.mounts),
    once per such object."""
    ctx = facts.ctx
    for found in facts.obs.foreign:
        message = report(found, ctx.info.kind, ctx.namespace, ctx.name)
        yield Event(WARNING, NOT_OWNED, message, f"not-owned:{found.occurrence}")


# ---- pods ---------------------------------------------------------------------------------------
def _pod_outcomes(facts: SyncFacts) -> Iterable[Event]:
    """Kubeflow's ReconcilePods: the exit code of every terminated pod, then its restart or failure."""
    ctx, kind = facts.ctx, facts.ctx.info.kind
    failing = {p.uid for _, p in facts.decision.exit_code_failures}
    types = {t.lower(): t for t in ctx.replica_specs}
    containers = {t: facts.fw.exit_code_container(ctx, t) for t in ctx.replica_specs}
    for pod in facts.pods:
        rtype = types.get(pod.rtype_label or "")
        if rtype is None:
            continue
        code = _terminated_code(pod, containers[rtype])
        if code is not None:
            message = f"Pod: {ctx.namespace}.{pod.name} exited with code {code}"
            yield Event(NORMAL, "ExitedWithCode", message, f"{pod.uid}:{code}")
        if pod.name in facts.decision.restarting:
            message = f"job {ctx.name} is restarting because {rtype} replica(s) failed."
            yield Event(WARNING, f"{kind}Restarting", message, pod.uid)
        elif pod.uid in failing:
            message = f'job "{ctx.name}" is failing because "{rtype}" replica(s) failed.'
            yield Event(WARNING, f"{kind}Failed", message, pod.uid, False)


def _terminated_code(pod: ObservedPod, container: str) -> int | None:
    """The exit code in the container's current state only, as Kubeflow reads it (not lastState)."""
    for status in (pod.obj.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != container:
            continue
        terminated = (status.get("state") or {}).get("terminated")
        if isinstance(terminated, dict) and isinstance(terminated.get("exitCode"), int):
            return int(terminated["exitCode"])
    return None


def _abnormal_pods(pods: Sequence[ObservedPod]) -> Iterable[Event]:
    """Kubeflow's RecordAbnormalPods: why an active pod is unwell, from its containers or conditions."""
    for pod in pods:
        status = pod.obj.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed") or pod.obj["metadata"].get("deletionTimestamp"):
            continue
        statuses = status.get("containerStatuses") or status.get("initContainerStatuses") or []
        if statuses:
            for ctr in statuses:
                state = ctr.get("state") or {}
                if "terminated" in state or "waiting" in state:  # running containers: nothing to say
                    yield from _container_trouble(pod, ctr)
            continue
        conditions = [x for x in status.get("conditions") or [] if isinstance(x, dict)]
        if not conditions:
            continue
        latest = max(conditions, key=lambda x: str(x.get("lastTransitionTime") or ""))
        if latest.get("status") != "True":
            message = f"Error pod {pod.name} condition message: {latest.get('message') or ''}"
            occurrence = f"{pod.uid}:{latest.get('type')}@{latest.get('lastTransitionTime')}"
            yield Event(WARNING, str(latest.get("reason") or ""), message, occurrence)


def _container_trouble(pod: ObservedPod, ctr: Json) -> Iterable[Event]:
    state = ctr.get("state") or {}
    name, restarts = ctr.get("name"), ctr.get("restartCount") or 0
    terminated, waiting = state.get("terminated"), state.get("waiting")
    if isinstance(terminated, dict) and terminated.get("exitCode") not in (0, None):
        message = (
            f"Error pod {pod.name} container {name} exitCode: {terminated.get('exitCode')} "
            f"terminated message: {terminated.get('message') or ''}"
        )
        yield Event(WARNING, str(terminated.get("reason") or ""), message, f"{pod.uid}:{name}:{restarts}")
    if isinstance(waiting, dict) and waiting.get("message"):
        message = f"Error pod {pod.name} container {name} waiting message: {waiting['message']}"
        yield Event(WARNING, str(waiting.get("reason") or ""), message, f"{pod.uid}:{name}:{restarts}")


# ---- children -----------------------------------------------------------------------------------
def _children(facts: SyncFacts) -> Iterable[Event]:
    """Created and deleted pods, services and PodGroups: the desired set against the observed one."""
    ctx = facts.ctx
    desired: set[tuple[Any, str]] = set()
    new_pods: list[Json] = []
    new_services: list[str] = []
    observed_pods = {p.name for p in facts.pods}
    observed_services = {str(o["metadata"]["name"]): o for o in (facts.children.get(SERVICE) or {}).values()}
    for obj in facts.desired:
        kind, name = obj.get("kind"), obj["metadata"]["name"]
        desired.add((kind, name))
        if kind == "Pod" and name not in observed_pods:
            new_pods.append(obj)
        elif kind == "Service" and name not in observed_services:
            new_services.append(name)
    start = facts.status.get("startTime")
    restarts: Mapping[str, Json] = facts.status.get("podRestarts") or {}
    types = {t.lower(): t for t in ctx.replica_specs}
    for obj in new_pods:
        name = obj["metadata"]["name"]
        occurrence = f"{start}/{(restarts.get(name) or {}).get('count', 0)}:{name}"
        rtype = types.get(_label(obj) or "")
        template = (ctx.replica_specs[rtype].get("template") or {}) if rtype else {}
        if (template.get("spec") or {}).get("restartPolicy"):
            message = "Restart policy in pod template will be overwritten by restart policy in replica spec"
            yield Event(WARNING, "SetPodTemplateRestartPolicy", message, occurrence)
        yield facts.fw.created_pod_event(ctx, rtype, name, occurrence)
    for pod in facts.pods:
        if ("Pod", pod.name) not in desired and not pod.deleting:
            yield Event(NORMAL, "SuccessfulDeletePod", f"Deleted pod: {pod.name}", pod.uid)
    for name in new_services:
        yield Event(NORMAL, "SuccessfulCreateService", f"Created service: {name}", f"{start}:{name}")
    for name, svc in observed_services.items():
        if ("Service", name) not in desired and not svc["metadata"].get("deletionTimestamp"):
            uid = str(svc["metadata"].get("uid") or name)
            yield Event(NORMAL, "SuccessfulDeleteService", f"Deleted service: {name}", uid)
    for key, group in facts.children.items():
        if not key.startswith("PodGroup."):
            continue
        for group_obj in group.values():
            meta = group_obj["metadata"]
            if meta.get("deletionTimestamp") or ("PodGroup", meta["name"]) in desired:
                continue
            uid = str(meta.get("uid") or meta["name"])
            yield Event(NORMAL, "JobTerminated", "Job has been terminated. Deleting PodGroup", uid)
            yield Event(NORMAL, "SuccessfulDeletePodGroup", f"Deleted PodGroup: {ctx.name}", uid)


def _label(obj: Json) -> str | None:
    labels = obj["metadata"].get("labels") or {}
    value = labels.get(c.LABEL_REPLICA_TYPE)
    return str(value) if value is not None else None
