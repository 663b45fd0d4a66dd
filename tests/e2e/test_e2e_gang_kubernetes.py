"""Native gang scheduling (`gangScheduler: kubernetes`) with the real kube-scheduler, on kwok nodes.

kube-scheduler 1.36 schedules a PodGroup of scheduling.k8s.io/v1alpha2 all or nothing when the
GenericWorkload and GangScheduling feature gates are on and the alpha API is served. This stack turns
them on for apiserver, controller manager and scheduler; the hooks run with
TRAINOP_GANG_SCHEDULER=kubernetes and the CompositeControllers list the PodGroup child, as the chart
renders them with `gangScheduler: kubernetes`.

The job is 1 Master + 3 Workers of 20 CPUs each; the one kwok node has 64, room for three. Without a
gang the scheduler would bind three pods and leave one Pending; with it, the three that fit wait in
the gang's Permit stage, unbound, until the fourth fits too (kube-scheduler waits up to five minutes
there, then retries), which it does once a second node joins.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from gang import gang_job
from gang import gang_stack as started_gang_stack
from trainop_stack import Namespace, TrainopStack, scratch_namespace

pytestmark = pytest.mark.e2e

# Without a gang, three pods would be bound within milliseconds of the fourth's failed attempt; this
# long after it, none of them may be.
UNBOUND_FOR_SECONDS = 5.0


@pytest.fixture(scope="module")
def gang_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainopStack]:
    with started_gang_stack(tmp_path_factory.mktemp("e2e-gang")) as stack:
        yield stack


@pytest.fixture
def ns(gang_stack: TrainopStack) -> Iterator[Namespace]:
    with scratch_namespace(gang_stack, "gang") as namespace:
        yield namespace


def bound(ns: Namespace, name: str) -> dict[str, str]:
    pods = ns.items("pods", f"training.kubeflow.org/job-name={name}")
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}


def insufficient_cpu_reported(ns: Namespace) -> bool:
    events = ns.items("events")
    return any(
        e.get("reason") == "FailedScheduling" and "Insufficient cpu" in e.get("message", "") for e in events
    )


def test_pod_group_is_kube_schedulers_own_gang_of_every_replica(ns: Namespace) -> None:
    ns.create(gang_job("pg"))
    ns.wait_until("the PodGroup child", lambda: ns.exists("podgroups.scheduling.k8s.io/pg"))
    group = ns.get("podgroups.scheduling.k8s.io/pg")
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    pods = ns.wait_children("pods", "pg", {"pg-master-0", "pg-worker-0", "pg-worker-1", "pg-worker-2"})
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods.values()} == {"pg"}


def test_a_gang_that_does_not_fit_stays_unbound_until_a_node_joins(
    gang_stack: TrainopStack, ns: Namespace
) -> None:
    ns.create(gang_job("g"))
    ns.wait_until("four pods of the job", lambda: len(bound(ns, "g")) == 4)
    ns.wait_until("the scheduler to find no room for the fourth pod", lambda: insufficient_cpu_reported(ns))

    deadline = time.monotonic() + UNBOUND_FOR_SECONDS
    while time.monotonic() < deadline:
        placed = {pod: node for pod, node in bound(ns, "g").items() if node}
        assert not placed, f"pods bound although the gang does not fit: {placed}"
        time.sleep(0.5)

    gang_stack.cp.create_node("kwok-node-1")
    ns.wait_until("every pod of the gang bound", lambda: all(bound(ns, "g").values()), timeout=120)
    assert len(bound(ns, "g")) == 4
