"""Placement annotations through the real webhook, honoured by the real kube-scheduler on kwok nodes.

Five kwok nodes labelled by zone and rack (zone-a: a1 rack-1, a2 rack-2, a3 rack-2; zone-b: b1 rack-3,
b2 rack-3); the stack's own unlabelled node is cordoned so that every pod lands on a labelled one.
Each test asserts where the pods landed, read from their `spec.nodeName`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from trainop_stack import IMAGE, Namespace, TrainopStack, job, kwok_annotations, scratch_namespace

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"
NODES = {
    "a1": {ZONE: "zone-a", RACK: "rack-1"},
    "a2": {ZONE: "zone-a", RACK: "rack-2"},
    "a3": {ZONE: "zone-a", RACK: "rack-2"},
    "b1": {ZONE: "zone-b", RACK: "rack-3"},
    "b2": {ZONE: "zone-b", RACK: "rack-3"},
}
PLACEMENT = "trainop.dev/placement"


@pytest.fixture(scope="module")
def placement_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainopStack]:
    stack = TrainopStack(tmp_path_factory.mktemp("e2e-placement"))
    try:
        stack.start()
        for name, labels in NODES.items():
            stack.cp.create_node(name, labels=labels)
        stack.kubectl("cordon", "kwok-node-0")
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def ns(placement_stack: TrainopStack) -> Iterator[Namespace]:
    with scratch_namespace(placement_stack, "place") as namespace:
        yield namespace


def replica(replicas: int) -> dict[str, Any]:
    return {
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": kwok_annotations(outcome=None, run_for=None)},
            "spec": {"containers": [{"name": "tensorflow", "image": IMAGE}]},
        },
    }


def tfjob(name: str, annotations: dict[str, str], **replicas: int) -> dict[str, Any]:
    out = job("TFJob", name, {rtype: replica(n) for rtype, n in replicas.items()})
    out["metadata"]["annotations"] = annotations
    return out


def placed(ns: Namespace, name: str, count: int, timeout: float = 60.0) -> dict[str, str]:
    """pod -> node once `count` pods of the job are bound."""
    found: dict[str, str] = {}

    def check() -> bool:
        nonlocal found
        pods = ns.items("pods", f"training.kubeflow.org/job-name={name}")
        found = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods}
        return sum(1 for node in found.values() if node) >= count

    ns.wait_until(f"{count} pods of {name} bound", check, timeout)
    return found


def by_type(pods: dict[str, str], rtype: str) -> list[str]:
    return [node for pod, node in sorted(pods.items()) if f"-{rtype.lower()}-" in pod]


def test_the_stored_template_holds_the_expanded_terms(ns: Namespace) -> None:
    ns.create(tfjob("shown", {f"{PLACEMENT}.Worker": "spread"}, Worker=2))
    stored = ns.get("tfjob/shown")
    affinity = stored["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"]
    [term] = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["matchLabelKeys"] == ["training.kubeflow.org/job-name", "training.kubeflow.org/replica-type"]


def test_a_bad_placement_is_denied_naming_the_annotation(ns: Namespace) -> None:
    done = ns.create(tfjob("bad", {f"{PLACEMENT}.Worker": "scatter"}, Worker=1), check=False)
    assert done.returncode != 0
    assert f"metadata.annotations[{PLACEMENT}.Worker]" in done.stderr
    assert "spread" in done.stderr


def test_a_hard_rule_warns_at_create_time(ns: Namespace) -> None:
    done = ns.create(tfjob("warned", {f"{PLACEMENT}.Worker": "spread"}, Worker=3))
    assert "Warning: spec.tfReplicaSpecs[Worker]: placement spread" in done.stderr


def test_spread_puts_each_worker_on_its_own_node(ns: Namespace) -> None:
    ns.create(tfjob("spread", {f"{PLACEMENT}.Worker": "spread"}, Worker=4))
    nodes = by_type(placed(ns, "spread", 4), "Worker")
    assert len(set(nodes)) == 4


def test_pack_puts_the_whole_job_in_one_rack(ns: Namespace) -> None:
    ns.create(tfjob("pack", {PLACEMENT: f"pack:{RACK}"}, PS=1, Worker=3))
    racks = {NODES[node][RACK] for node in placed(ns, "pack", 4).values()}
    assert len(racks) == 1


def test_exclusive_gives_each_job_a_zone_of_its_own(ns: Namespace) -> None:
    ns.create(tfjob("first", {PLACEMENT: f"exclusive:{ZONE}"}, Worker=2))
    first = {NODES[node][ZONE] for node in placed(ns, "first", 2).values()}
    ns.create(tfjob("second", {PLACEMENT: f"exclusive:{ZONE}"}, Worker=2))
    second = {NODES[node][ZONE] for node in placed(ns, "second", 2).values()}
    assert len(first) == len(second) == 1
    assert first != second


def test_a_hard_rule_that_cannot_be_met_stays_pending_with_the_schedulers_reason(ns: Namespace) -> None:
    # Five labelled nodes, six Workers that may not share one.
    ns.create(tfjob("toomany", {f"{PLACEMENT}.Worker": "spread"}, Worker=6))
    pods = placed(ns, "toomany", 5)
    [pending] = [pod for pod, node in pods.items() if not node]

    def reason() -> bool:
        events = ns.items("events")
        return any(
            e["involvedObject"]["name"] == pending
            and e["reason"] == "FailedScheduling"
            and "anti-affinity" in e["message"]
            for e in events
        )

    ns.wait_until(f"the scheduler's reason on {pending}", reason)
    assert ns.get(f"pod/{pending}")["status"]["phase"] == "Pending"
