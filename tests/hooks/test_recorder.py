"""Recording events (hooks.recorder): once per occurrence, repeats aggregated into one object, nothing for
a job the apiserver does not have, and never a blocked or failed sync."""

from __future__ import annotations

import copy
import json
import logging
import threading
from datetime import timedelta

from hooks.app import create_app
from hooks.recorder import OCCURRENCE, Batch, Recorder, event_object, spec_digest
from tests.builders import T0, job
from trainop.job.event import Event
from trainop.job.settings import Settings
from trainop.jsontypes import Json

logging.getLogger("trainop.hooks").setLevel(logging.CRITICAL)
NOW = T0
JOB = {
    **job("PyTorchJob", name="j", namespace="ns", Master=1),
    "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
}
CREATED = Event("Normal", "SuccessfulCreatePod", "Created pod: j-master-0", "first")
# How long a test waits for the writer thread: room for a loaded machine, spent only when it hangs.
DRAIN_SECONDS = 60


class FakeEventApi:
    """The apiserver's events and one job, counting every request."""

    def __init__(self, job_on_server: Json | None = JOB) -> None:
        self.job = copy.deepcopy(job_on_server)
        # resourceVersion -> the job as it was then (the apiserver's history, until compacted)
        self.history: dict[str, Json] = {}
        self.events: dict[str, Json] = {}
        self.requests: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail_creates = False

    def get_job(self, kind: str, namespace: str, name: str) -> Json | None:
        self.gate.wait()
        self.requests.append("get-job")
        return copy.deepcopy(self.job)

    def get_job_at(self, kind: str, namespace: str, name: str, revision: str) -> Json | None:
        self.requests.append(f"get-job-at-{revision}")
        return copy.deepcopy(self.history.get(revision))

    def create_event(self, namespace: str, event: Json) -> bool:
        self.requests.append("create")
        if self.fail_creates:
            raise OSError("apiserver unreachable")
        name = event["metadata"]["name"]
        if name in self.events:
            return False
        self.events[name] = {
            **copy.deepcopy(event),
            "metadata": {**event["metadata"], "resourceVersion": "1"},
        }
        return True

    def get_event(self, namespace: str, name: str) -> Json | None:
        self.requests.append("read")
        return copy.deepcopy(self.events.get(name))

    def patch_event(self, namespace: str, name: str, patch: Json) -> bool:
        self.requests.append("patch")
        stored = self.events[name]
        if patch["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            return False
        stored["metadata"]["annotations"].update(patch["metadata"]["annotations"])
        stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        stored.update(count=patch["count"], lastTimestamp=patch["lastTimestamp"])
        return True


def batch(*events: Event, uid: str = "u1", spec: Json | None = None, revision: str = "") -> Batch:
    """A batch from a sync of JOB (or of JOB with `spec`) at `revision`."""
    digest = spec_digest({"spec": spec or JOB["spec"]})
    return Batch("PyTorchJob", "ns", "j", uid, events, spec=digest, revision=revision)


def recorder(api: FakeEventApi) -> Recorder:
    return Recorder(api, clock=lambda: NOW)


def test_an_event_is_created_as_kubeflows_recorder_would() -> None:
    api = FakeEventApi()
    recorder(api).write(batch(CREATED))
    [stored] = api.events.values()
    assert stored["involvedObject"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "namespace": "ns",
        "name": "j",
        "uid": "u1",
        "resourceVersion": "",
    }
    assert (stored["type"], stored["reason"], stored["message"], stored["count"]) == (
        "Normal",
        "SuccessfulCreatePod",
        "Created pod: j-master-0",
        1,
    )
    assert stored["source"] == {"component": "pytorchjob-controller"}
    assert stored["firstTimestamp"] == stored["lastTimestamp"] == "2024-05-01T12:00:00Z"


def test_a_retried_sync_in_another_process_gets_409_and_changes_nothing() -> None:
    api = FakeEventApi()
    recorder(api).write(batch(CREATED))
    recorder(api).write(batch(CREATED))  # a fresh process: no cache
    [stored] = api.events.values()
    assert stored["count"] == 1
    assert "patch" not in api.requests


def test_a_genuine_repeat_bumps_the_count_of_the_same_object() -> None:
    api = FakeEventApi()
    rec = recorder(api)
    rec.write(batch(CREATED))
    rec.write(batch(Event(CREATED.type, CREATED.reason, CREATED.message, "second")))
    [stored] = api.events.values()
    assert stored["count"] == 2
    assert stored["metadata"]["annotations"][OCCURRENCE] == "second"


def test_events_already_recorded_by_this_process_cost_no_request() -> None:
    api = FakeEventApi()
    rec = recorder(api)
    rec.submit(JOB, [CREATED])
    assert rec.drain(DRAIN_SECONDS)
    api.requests.clear()
    rec.submit(JOB, [CREATED])
    assert rec.drain(DRAIN_SECONDS)
    assert api.requests == []


def test_nothing_is_recorded_for_a_job_the_apiserver_does_not_have() -> None:
    api = FakeEventApi(job_on_server=None)
    recorder(api).write(batch(CREATED))
    assert api.events == {}


def test_nothing_is_recorded_when_the_apiservers_job_has_another_uid() -> None:
    api = FakeEventApi()
    recorder(api).write(batch(CREATED, uid="forged"))
    assert api.events == {}
    assert api.requests == ["get-job"]


def test_one_job_read_per_batch() -> None:
    api = FakeEventApi()
    other = Event("Normal", "SuccessfulCreateService", "Created service: j-master-0", "first")
    recorder(api).write(batch(CREATED, other))
    assert api.requests.count("get-job") == 1
    assert len(api.events) == 2


def test_submit_never_blocks_even_when_the_queue_is_full() -> None:
    api = FakeEventApi()
    api.gate.clear()  # the writer thread hangs on its first request
    rec = Recorder(api, clock=lambda: NOW, max_batches=1)
    submitted = threading.Event()

    def submit_all() -> None:
        for i in range(20):
            rec.submit(JOB, [Event("Normal", "R", f"m{i}", "o")])
        submitted.set()

    threading.Thread(target=submit_all, daemon=True).start()
    # A submit that waited for room in the queue would wait for the gate, which opens only below: the
    # bound is for a loaded machine to run 20 calls, not a measure of their speed.
    assert submitted.wait(DRAIN_SECONDS)
    api.gate.set()
    assert rec.drain(DRAIN_SECONDS)


def test_api_errors_are_logged_never_raised() -> None:
    api = FakeEventApi()
    api.fail_creates = True
    recorder(api).write(batch(CREATED))
    assert api.events == {}


def test_event_object_uses_the_servers_resource_version() -> None:
    server = {**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "42"}}
    body = event_object(server, CREATED, NOW)
    assert body["involvedObject"]["resourceVersion"] == "42"
    assert body["metadata"]["name"] == CREATED.name("j", "u1")


def test_the_sync_route_hands_its_events_to_the_recorder() -> None:
    api = FakeEventApi()
    rec = recorder(api)
    app = create_app(Settings(), None, lambda: NOW, recorder=rec).test_client()
    body = {"parent": copy.deepcopy(JOB), "children": {}, "finalizing": False}
    response = app.post("/sync", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200
    assert rec.drain(DRAIN_SECONDS)
    assert sorted(e["message"] for e in api.events.values()) == [
        "Created pod: j-master-0",
        "Created service: j-master-0",
    ]


def test_events_about_children_are_limited_to_kubeflows_burst_of_25_per_job_and_type() -> None:
    api = FakeEventApi()
    created = [
        Event("Normal", "SuccessfulCreatePod", f"Created pod: j-worker-{i}", "first") for i in range(40)
    ]
    recorder(api).write(batch(*created))
    assert len(api.events) == 25


def test_the_jobs_own_transitions_are_recorded_past_the_limit() -> None:
    api = FakeEventApi()
    created = [
        Event("Normal", "SuccessfulCreatePod", f"Created pod: j-worker-{i}", "first") for i in range(30)
    ]
    succeeded = Event("Normal", "PyTorchJobSucceeded", "PyTorchJob j is successfully completed.", "s", False)
    recorder(api).write(batch(*created, succeeded))
    assert "PyTorchJob j is successfully completed." in {e["message"] for e in api.events.values()}


def test_the_limit_refills_one_event_per_five_minutes() -> None:
    api = FakeEventApi()
    clock = [NOW]
    rec = Recorder(api, clock=lambda: clock[0])
    rec.write(batch(*[Event("Warning", "R", f"m{i}", "o") for i in range(25)]))
    rec.write(batch(Event("Warning", "R", "late", "o")))
    assert "late" not in {e["message"] for e in api.events.values()}
    clock[0] = NOW + timedelta(seconds=300)
    rec.write(batch(Event("Warning", "R", "later", "o")))
    assert "later" in {e["message"] for e in api.events.values()}


class DeletingApi(FakeEventApi):
    """FakeEventApi that can also delete its job, as the TTL path does."""

    def delete_job(self, job: Json) -> bool:
        self.requests.append("delete")
        self.job = None
        return True


def expired_job() -> Json:
    out = copy.deepcopy(JOB)
    out["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 0}
    done = (NOW - timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out["status"] = {
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}],
        "startTime": done,
        "completionTime": done,
    }
    return out


def test_a_ttl_deletion_records_kubeflows_deleted_job_event_before_deleting() -> None:
    api = DeletingApi(expired_job())
    rec = recorder(api)
    app = create_app(Settings(), api, lambda: NOW, recorder=rec).test_client()
    body = {"parent": expired_job(), "children": {}, "finalizing": False}
    assert app.post("/sync", data=json.dumps(body), content_type="application/json").status_code == 200
    assert rec.drain(DRAIN_SECONDS)
    assert [(e["reason"], e["message"]) for e in api.events.values()] == [
        ("SuccessfulDeletePod", "Deleted job: j")
    ]
    assert api.requests.index("create") < api.requests.index("delete")


def test_events_queued_before_a_ttl_deletion_are_still_recorded() -> None:
    api = FakeEventApi()
    rec = recorder(api)
    rec.record_deletion(JOB)
    api.job = None  # deleted before the writer reaches the batch
    rec.write(batch(CREATED))
    assert sorted(e["message"] for e in api.events.values()) == ["Created pod: j-master-0", "Deleted job: j"]


def test_a_deleted_jobs_record_vouches_for_its_own_uid_only() -> None:
    api = FakeEventApi()
    rec = recorder(api)
    rec.record_deletion(JOB)
    api.job = None
    rec.write(batch(CREATED, uid="forged"))
    assert [e["message"] for e in api.events.values()] == ["Deleted job: j"]


# ---- only what the apiserver's copy justifies ------------------------------------------------------
def test_nothing_is_recorded_when_the_requests_spec_is_not_the_apiservers() -> None:
    api = FakeEventApi()
    forged = {**JOB["spec"], "pytorchReplicaSpecs": {"Evil": {"replicas": 1}}}
    recorder(api).write(batch(CREATED, spec=forged))
    assert api.events == {}


def suspended(job_: Json, suspend: bool) -> Json:
    out = copy.deepcopy(job_)
    out["spec"]["runPolicy"] = {**(out["spec"].get("runPolicy") or {}), "suspend": suspend}
    return out


SUSPENDED = Event("Normal", "PyTorchJobSuspended", "PyTorchJob j is suspended.", "first")


def test_events_of_a_spec_the_job_had_at_the_requests_revision_are_recorded_after_it_changed() -> None:
    api = FakeEventApi(suspended(JOB, False))  # resumed before the writer reached the batch
    api.history["41"] = suspended(JOB, True)
    recorder(api).write(batch(SUSPENDED, spec=suspended(JOB, True)["spec"], revision="41"))
    assert [e["reason"] for e in api.events.values()] == ["PyTorchJobSuspended"]
    assert "get-job-at-41" in api.requests


def test_a_spec_the_job_never_had_at_the_requests_revision_records_nothing() -> None:
    api = FakeEventApi()
    api.history["41"] = copy.deepcopy(JOB)
    forged = {**JOB["spec"], "pytorchReplicaSpecs": {"Evil": {"replicas": 1}}}
    recorder(api).write(batch(CREATED, spec=forged, revision="41"))
    assert api.events == {}


def test_a_past_job_of_another_uid_records_nothing() -> None:
    api = FakeEventApi(suspended(JOB, False))
    api.history["41"] = {**suspended(JOB, True), "metadata": {**JOB["metadata"], "uid": "predecessor"}}
    recorder(api).write(batch(SUSPENDED, spec=suspended(JOB, True)["spec"], revision="41"))
    assert api.events == {}


def test_the_current_spec_costs_no_read_of_the_history() -> None:
    api = FakeEventApi()
    recorder(api).write(batch(CREATED, revision="41"))
    assert not any(r.startswith("get-job-at") for r in api.requests)


def invalid_job() -> Json:
    """JOB with a replica type PyTorchJob does not have, as stored by an apiserver without the webhooks."""
    out = copy.deepcopy(JOB)
    out["spec"]["pytorchReplicaSpecs"]["Chief"] = copy.deepcopy(out["spec"]["pytorchReplicaSpecs"]["Master"])
    return out


def failed_validation(parent: Json) -> Event:
    """The validation failure event the sync of `parent` implies."""
    from trainop.controller.sync import sync

    [event] = sync(copy.deepcopy(parent), {}, Settings(), NOW).events
    assert event.validation
    return event


def test_a_validation_failure_is_recorded_when_the_apiservers_copy_fails_the_same_way() -> None:
    api = FakeEventApi(invalid_job())
    event = failed_validation(invalid_job())
    recorder(api).write(batch(event, spec=invalid_job()["spec"]))
    assert [(e["reason"], e["message"]) for e in api.events.values()] == [(event.reason, event.message)]


def test_a_validation_failure_claimed_for_a_job_deleted_by_its_ttl_is_not_recorded() -> None:
    api = FakeEventApi()
    rec = recorder(api)
    rec.record_deletion(JOB)
    api.job = None  # only the Deleted job event vouches for the uid; there is no spec to compare
    rec.write(batch(failed_validation(invalid_job()), spec=invalid_job()["spec"]))
    assert [e["message"] for e in api.events.values()] == ["Deleted job: j"]


def test_the_jobs_own_events_are_limited_to_a_burst_of_25_per_job() -> None:
    api = FakeEventApi()
    own = [Event("Normal", "PyTorchJobSuspended", f"suspended {i}", f"s{i}", False) for i in range(40)]
    recorder(api).write(batch(*own))
    assert len(api.events) == 25


def test_every_event_of_the_process_shares_a_burst_of_500_then_10_a_second() -> None:
    api = FakeEventApi()
    clock = [NOW]
    rec = Recorder(api, clock=lambda: clock[0])
    for i in range(30):  # 30 jobs of 25 events each: 750 offered, within every job's own limit
        api.job = {**JOB, "metadata": {**JOB["metadata"], "uid": f"u{i}"}}
        rec.write(batch(*[Event("Normal", "R", f"m{n}", "o") for n in range(25)], uid=f"u{i}"))
    assert len(api.events) == 500
    clock[0] = NOW + timedelta(seconds=1)
    api.job = {**JOB, "metadata": {**JOB["metadata"], "uid": "late"}}
    rec.write(batch(*[Event("Normal", "R", f"late{n}", "o") for n in range(25)], uid="late"))
    assert len(api.events) == 510


def test_the_deleted_job_event_counts_against_the_jobs_own_limit() -> None:
    api = FakeEventApi()
    rec = recorder(api)
    rec.write(batch(*[Event("Normal", "PyTorchJobSuspended", f"s{i}", f"s{i}", False) for i in range(25)]))
    rec.record_deletion(JOB)
    assert "Deleted job: j" not in {e["message"] for e in api.events.values()}
