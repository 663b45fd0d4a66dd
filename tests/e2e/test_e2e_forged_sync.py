"""Forged `/sync` calls naming a real job, on the real control plane: the hooks write only Events the
apiserver's copy of the job justifies, bounded and rate-limited (docs/limits.md#events-and-metrics).

The caller knows the job as anyone who can read it does (namespace, name, uid, spec) and posts straight
to the hook port, as a pod that reaches it could. The job is real and running (kwok), so the hooks'
recorder finds it on the apiserver.
"""

from __future__ import annotations

import copy
import json
import time
import urllib.request

import pytest
from test_e2e_events import job_events, wait_events
from trainop_stack import Namespace, TrainopStack, job, kwok_annotations, replica

from hooks.recorder import SPAM_BURST
from trainop.job.event import MAX_MESSAGE_BYTES
from trainop.jsontypes import Json

pytestmark = pytest.mark.e2e

RUN_FOREVER = kwok_annotations(outcome=None, run_for=None)
FORGED = 200


def post_sync(stack: TrainopStack, parent: Json, children: Json) -> int:
    body = json.dumps({"parent": parent, "children": children, "finalizing": False}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{stack.hook_port}/sync",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def settled_events(ns: Namespace, kind: str, name: str, quiet_seconds: float = 10) -> list[Json]:
    """The job's Events once no new one or new count has appeared for `quiet_seconds`."""
    last: object = None
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 180
    while True:
        events = job_events(ns, kind, name)
        state = sorted((e["metadata"]["name"], e.get("count")) for e in events)
        if state != last:
            last, quiet_since = state, time.monotonic()
        elif time.monotonic() - quiet_since > quiet_seconds:
            return events
        if time.monotonic() > deadline:
            raise AssertionError(f"the Events of {kind}/{name} kept changing for 180 s")
        time.sleep(1)


def victim(ns: Namespace) -> tuple[Json, Json]:
    """A running PyTorchJob as the apiserver holds it, and its master pod."""
    ns.apply(job("PyTorchJob", "victim", {"Master": replica("PyTorchJob", annotations=RUN_FOREVER)}))
    created = ("Normal", "SuccessfulCreatePod", "Created pod: victim-master-0")
    wait_events(ns, "PyTorchJob", "victim", {created})
    ns.wait_phase("victim-master-0", "Running", timeout=60)
    return ns.get("pytorchjob/victim"), ns.get("pod/victim-master-0")


def test_forged_syncs_with_unsupported_replica_types_write_no_event(
    stack: TrainopStack, namespace: Namespace
) -> None:
    server, _ = victim(namespace)
    for i in range(FORGED):
        forged = copy.deepcopy(server)
        forged["spec"]["pytorchReplicaSpecs"][f"Evil{i}"] = {"replicas": 1}
        assert post_sync(stack, forged, {}) == 200
    events = settled_events(namespace, "PyTorchJob", "victim")
    print(f"\n{FORGED} forged syncs with unsupported replica types: {len(events)} Events on the job in all")
    assert [e for e in events if e["type"] == "Warning"] == []


def test_forged_pod_messages_write_bounded_events_within_the_per_job_burst(
    stack: TrainopStack, namespace: Namespace
) -> None:
    server, pod = victim(namespace)
    for i in range(FORGED):
        forged = copy.deepcopy(pod)
        message = f"pwned {i} " + ("x" * 1_400_000 if i == 0 else "")
        state = {"waiting": {"reason": "ImagePullBackOff", "message": message}}
        forged["status"] = {
            "phase": "Pending",
            "containerStatuses": [{"name": "pytorch", "restartCount": 0, "state": state}],
        }
        assert post_sync(stack, server, {"Pod.v1": {"victim-master-0": forged}}) == 200
    events = settled_events(namespace, "PyTorchJob", "victim")
    warnings = [e for e in events if e["type"] == "Warning"]
    longest = max(len(e["message"].encode()) for e in warnings)
    print(f"\n{FORGED} forged pod messages: {len(warnings)} Warning Events, the longest {longest} bytes")
    assert 0 < len(warnings) <= SPAM_BURST * stack.hook_workers
    assert longest <= MAX_MESSAGE_BYTES
