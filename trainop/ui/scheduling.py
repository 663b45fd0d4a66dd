"""Why a job's pods wait, beyond their own conditions and Events: the gang scheduler's PodGroup and the
Kueue Workload, read as the user.

The sync makes a PodGroup named after the job under one of three APIs (Volcano's, scheduler-plugins'
coscheduling, or kube-scheduler's own), whichever the operator is set up for; Kueue makes a Workload
owned by a job that carries its queue label. An API that is not installed is left out without a word;
one the user may not read gets a note.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from trainop.job.gang import KUBERNETES_API
from trainop.jsontypes import Json
from trainop.kubeclient import ApiError
from trainop.ui.summary import QUEUE_LABEL

Get = Callable[[str], Json]  # GET a path as the user; raises ApiError

# Where the sync's PodGroups may be (trainop/controller/podgroups.py makes them, named after the job).
POD_GROUP_APIS = ("scheduling.volcano.sh/v1beta1", "scheduling.x-k8s.io/v1alpha1", KUBERNETES_API)
WORKLOAD_API = "kueue.x-k8s.io/v1beta1"
# The Events a scheduler writes about a pod it cannot place.
SCHEDULING_REASONS = ("FailedScheduling", "Unschedulable")
# How long an answer of "is this API served" is reused: the job's page asks every second while it waits.
DISCOVERY_SECONDS = 60.0


class SchedulingEvent(Protocol):
    """What is read of an Event (trainop.ui.source.EventRow, which holds a Gate and so is not imported)."""

    @property
    def object(self) -> str: ...  # `<Kind>/<name>`
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Gate:
    """One object that decides when the job's pods may start, and what it says."""

    what: str  # "PodGroup" or "Workload"
    api: str
    name: str
    state: str  # the PodGroup's phase; for a Workload "Admitted" or "Pending" (or "Finished")
    conditions: tuple[Condition, ...]
    facts: tuple[tuple[str, str], ...] = ()  # counts of members, the ClusterQueue that admitted it


class Discovery:
    """Which group/versions the cluster serves, asked with the UI's own credentials (discovery is open to
    every signed-in user, so nothing is revealed) and remembered for a while."""

    def __init__(self, get: Get) -> None:
        self.get = get
        self.lock = threading.Lock()
        self.known: dict[str, tuple[float, bool]] = {}

    def served(self, api: str) -> bool:
        now = time.monotonic()
        with self.lock:
            hit = self.known.get(api)
        if hit and hit[0] > now:
            return hit[1]
        try:
            self.get(f"/apis/{api}")
            served = True
        except ApiError as exc:
            served = exc.status not in (404, 503)  # 503: an aggregated API whose server is down
        except OSError:
            served = False
        with self.lock:
            self.known[api] = (now + DISCOVERY_SECONDS, served)
        return served


def gates(get: Get, discovery: Discovery, job: Json, pods: list[Json]) -> tuple[list[Gate], list[str]]:
    """The PodGroups and Workloads of `job` (whose pods are `pods`) the user may read, and notes about
    what they may not."""
    meta = job.get("metadata") or {}
    ns, name, uid = str(meta.get("namespace") or "default"), str(meta.get("name") or ""), meta.get("uid")
    found: list[Gate] = []
    notes: list[str] = []
    for api in POD_GROUP_APIS:
        if not discovery.served(api):
            continue
        try:
            obj = get(f"/apis/{api}/namespaces/{ns}/podgroups/{name}")
            found.append(_kube_pod_group(obj, pods) if api == KUBERNETES_API else _pod_group(api, obj))
        except ApiError as exc:
            if exc.status in (401, 403):
                notes.append(f"you may not read PodGroups ({api}) in this namespace")
    if (meta.get("labels") or {}).get(QUEUE_LABEL) and discovery.served(WORKLOAD_API):
        try:
            listed = get(f"/apis/{WORKLOAD_API}/namespaces/{ns}/workloads").get("items") or []
        except ApiError as exc:
            listed = []
            if exc.status in (401, 403):
                notes.append("you may not list Kueue Workloads in this namespace")
        found += [
            _workload(w)
            for w in listed
            if any(o.get("uid") == uid for o in (w.get("metadata") or {}).get("ownerReferences") or [])
        ]
    return found, notes


def _conditions(status: Json) -> tuple[Condition, ...]:
    return tuple(
        Condition(
            str(c.get("type") or ""),
            str(c.get("status") or ""),
            str(c.get("reason") or ""),
            str(c.get("message") or ""),
        )
        for c in status.get("conditions") or []
        if isinstance(c, dict)
    )


def _pod_group(api: str, obj: Json) -> Gate:
    status = obj.get("status") or {}
    facts = tuple(
        (key, str(status[key]))
        for key in ("scheduled", "running", "succeeded", "failed")
        if isinstance(status.get(key), int)
    )
    min_member = (obj.get("spec") or {}).get("minMember")
    if isinstance(min_member, int):
        facts = (("minMember", str(min_member)), *facts)
    name = str((obj.get("metadata") or {}).get("name") or "")
    return Gate("PodGroup", api, name, str(status.get("phase") or ""), _conditions(status), facts)


def _kube_pod_group(obj: Json, pods: list[Json]) -> Gate:
    """kube-scheduler's own PodGroup keeps no phase and no member counts: it writes one condition,
    PodGroupScheduled (True once the gang is placed; False with the reason Unschedulable or
    SchedulerError), and the members are the pods that name the group in spec.schedulingGroup."""
    status = obj.get("status") or {}
    conditions = _conditions(status)
    scheduled = next((c for c in conditions if c.type == "PodGroupScheduled"), None)
    if scheduled is None:
        state = ""
    elif scheduled.status == "True":
        state = "Scheduled"
    else:
        state = scheduled.reason or "Pending"
    name = str((obj.get("metadata") or {}).get("name") or "")
    policy = (obj.get("spec") or {}).get("schedulingPolicy") or {}
    facts: tuple[tuple[str, str], ...] = ()
    min_count = (policy.get("gang") or {}).get("minCount")
    if isinstance(min_count, int):
        facts += (("minCount", str(min_count)),)
    elif "basic" in policy:
        facts += (("policy", "basic (each pod on its own)"),)
    members = [
        p for p in pods if ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") == name
    ]
    bound = sum(1 for p in members if (p.get("spec") or {}).get("nodeName"))
    facts += (("members", f"{len(members)} pods, {bound} bound to a node"),)
    return Gate("PodGroup", KUBERNETES_API, name, state, conditions, facts)


def _workload(obj: Json) -> Gate:
    status = obj.get("status") or {}
    conditions = _conditions(status)
    true = {c.type for c in conditions if c.status == "True"}
    state = "Finished" if "Finished" in true else "Admitted" if "Admitted" in true else "Pending"
    facts: tuple[tuple[str, str], ...] = ()
    queue = (obj.get("spec") or {}).get("queueName")
    if queue:
        facts += (("queue", str(queue)),)
    cluster_queue = (status.get("admission") or {}).get("clusterQueue")
    if cluster_queue:
        facts += (("clusterQueue", str(cluster_queue)),)
    name = str((obj.get("metadata") or {}).get("name") or "")
    return Gate("Workload", WORKLOAD_API, name, state, conditions, facts)


def why_pending(pod: Json, events: Sequence[SchedulingEvent]) -> list[str]:
    """What a Pending pod says about why it waits: its unmet conditions (the scheduler's latest word),
    its containers' waiting reasons, and the scheduling Events about it, each text once: the
    scheduler repeats the same message in the condition and in an Event per attempt."""
    status = pod.get("status") or {}
    if (status.get("phase") or "Pending") != "Pending":
        return []
    said: list[str] = []
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and c.get("status") == "False" and c.get("reason"):
            said.append(f"{c['reason']}: {c['message']}" if c.get("message") else str(c["reason"]))
    for c in status.get("containerStatuses") or []:
        reason = ((c.get("state") or {}).get("waiting") or {}).get("reason")
        if reason and reason not in said:
            said.append(str(reason))
    about = f"Pod/{(pod.get('metadata') or {}).get('name')}"
    for e in events:
        if e.object == about and e.reason in SCHEDULING_REASONS and not any(e.message in s for s in said):
            said.append(e.message)
    return said


def waiting(pods: list[Json], finished: bool) -> bool:
    """Whether the page should say why the job waits: it has not finished and a pod of it is Pending,
    or it has no pod at all yet (Kueue holds a job suspended, with no pods, until it admits it)."""
    if finished:
        return False
    return not pods or any(((p.get("status") or {}).get("phase") or "Pending") == "Pending" for p in pods)
