"""What a job's page says about why its pods wait, from objects shaped as kube-scheduler writes them:
its own PodGroup (scheduling.k8s.io/v1alpha2: a gang policy, one PodGroupScheduled condition, members
that name the group in spec.schedulingGroup) and the pods' Unschedulable condition and
FailedScheduling Events, repeated on every attempt."""

from __future__ import annotations

from typing import Any

from tests.ui.helpers import pod, pytorch
from trainop.job.gang import KUBERNETES_API
from trainop.jsontypes import Json
from trainop.kubeclient import ApiError
from trainop.ui.scheduling import Discovery, gates, why_pending
from trainop.ui.source import EventRow

GANG_WAITS = "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled"
NO_ROOM = "0/1 nodes are available: 1 Insufficient cpu."


def kube_pod_group(name: str, min_count: int, scheduled: tuple[str, str, str] | None) -> Json:
    status, reason, message = scheduled or ("", "", "")
    conditions = [{"type": "PodGroupScheduled", "status": status, "reason": reason, "message": message}]
    return {
        "apiVersion": KUBERNETES_API,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        "status": {"conditions": conditions} if scheduled else {},
    }


def member(name: str, group: str, node: str = "") -> Json:
    p = pod(name, phase="Pending" if not node else "Running")
    p["spec"] = {"schedulingGroup": {"podGroupName": group}, **({"nodeName": node} if node else {})}
    return p


def unschedulable(p: Json, message: str) -> Json:
    p["status"]["containerStatuses"] = []
    p["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    return p


def failed_scheduling(pod_name: str, message: str, time: str) -> EventRow:
    return EventRow(time, "Warning", "FailedScheduling", message, object=f"Pod/{pod_name}")


def read_gates(group: Json, pods: list[Json]) -> Any:
    """The gates of the job `waits` on a cluster that serves only kube-scheduler's PodGroup API."""

    def get(path: str) -> Json:
        if path == f"/apis/{KUBERNETES_API}":
            return {}
        if path == f"/apis/{KUBERNETES_API}/namespaces/default/podgroups/waits":
            return group
        raise ApiError("GET", path, 404, "not found")

    found, notes = gates(get, Discovery(get), pytorch("waits"), pods)
    assert notes == []
    return found


def test_kube_schedulers_unschedulable_gang_shows_its_reason_as_the_state():
    group = kube_pod_group("waits", 4, ("False", "Unschedulable", "pod group is unschedulable"))
    [gate] = read_gates(group, [member(f"waits-worker-{i}", "waits") for i in range(4)])
    assert (gate.what, gate.api, gate.state) == ("PodGroup", KUBERNETES_API, "Unschedulable")
    [condition] = gate.conditions
    assert (condition.type, condition.status, condition.message) == (
        "PodGroupScheduled",
        "False",
        "pod group is unschedulable",
    )


def test_kube_schedulers_gang_shows_its_min_count_and_how_many_members_are_bound():
    group = kube_pod_group("waits", 4, ("True", "Scheduled", ""))
    pods = [member("waits-worker-0", "waits", node="kwok-node-0"), member("waits-worker-1", "waits")]
    [gate] = read_gates(group, [*pods, member("other-worker-0", "other")])
    assert gate.facts == (("minCount", "4"), ("members", "2 pods, 1 bound to a node"))


def test_a_placed_gang_is_scheduled():
    [gate] = read_gates(kube_pod_group("waits", 4, ("True", "Scheduled", "")), [])
    assert gate.state == "Scheduled"


def test_a_gang_the_scheduler_has_not_tried_yet_has_no_state():
    [gate] = read_gates(kube_pod_group("waits", 4, None), [])
    assert (gate.state, gate.conditions) == ("", ())


def test_the_schedulers_message_repeated_in_condition_and_events_is_said_once():
    p = unschedulable(pod("waits-worker-0", phase="Pending"), GANG_WAITS)
    events = [failed_scheduling("waits-worker-0", GANG_WAITS, t) for t in ("17:10:07", "17:10:08")]
    assert why_pending(p, events) == [f"Unschedulable: {GANG_WAITS}"]


def test_an_earlier_scheduling_event_with_another_message_is_kept():
    p = unschedulable(pod("waits-worker-0", phase="Pending"), GANG_WAITS)
    events = [failed_scheduling("waits-worker-0", NO_ROOM, "17:10:07")]
    assert why_pending(p, events) == [f"Unschedulable: {GANG_WAITS}", NO_ROOM]


def test_scheduling_events_of_another_pod_are_not_this_pods_reason():
    p = unschedulable(pod("waits-worker-1", phase="Pending"), GANG_WAITS)
    events = [failed_scheduling("waits-worker-2", NO_ROOM, "17:10:07")]
    assert why_pending(p, events) == [f"Unschedulable: {GANG_WAITS}"]


def test_a_pending_pods_waiting_container_reason_is_said():
    p = pod("waits-worker-0", phase="Pending")
    p["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "ContainerCreating"}}
    assert why_pending(p, []) == ["ContainerCreating"]


def test_a_running_pod_says_nothing_of_why_it_waited():
    p = unschedulable(pod("waits-worker-0", phase="Running"), GANG_WAITS)
    assert why_pending(p, [failed_scheduling("waits-worker-0", NO_ROOM, "17:10:07")]) == []
