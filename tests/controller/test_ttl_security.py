"""TTL deletion acts on the apiserver's copy of a job, never on the job a `/sync` caller sends.

Anyone who can reach the hook Service can POST a finished, expired copy of a running job with its real
uid; these tests pin that such a request deletes nothing, that a genuinely expired job is still
deleted (with the server's copy, whose uid guards the DELETE), and that the answer to such a request
tells its caller nothing about the server's copy.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime

from hooks.app import create_app
from tests.builders import job, with_run_policy
from tests.controller.fakes import at, stamp
from tests.hooks.test_http import Clock, FakeDeleter
from trainop.controller.ttl import RECHECK_SECONDS, verdict
from trainop.job.settings import Settings
from trainop.jsontypes import Json

NOW = at(100)


def running_job(ttl: int = 0) -> Json:
    out = with_run_policy(
        job("PyTorchJob", name="train", namespace="ns", Master=1, Worker=1), ttlSecondsAfterFinished=ttl
    )
    out["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
            {"type": "Running", "status": "True", "reason": "PyTorchJobRunning"},
        ],
        "startTime": stamp(0),
    }
    return out


def finished(obj: Json, at_seconds: float = 10, ctype: str = "Succeeded") -> Json:
    out = copy.deepcopy(obj)
    out["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
            {"type": "Running", "status": "False", "reason": "PyTorchJobRunning"},
            {"type": ctype, "status": "True", "reason": f"PyTorchJob{ctype}"},
        ],
        "startTime": stamp(0),
        "completionTime": stamp(at_seconds),
    }
    return out


def forged_from(server: Json) -> Json:
    """What an attacker with read access can build: the real object, marked finished long ago."""
    return finished(server, at_seconds=0)


# ---- the decision ------------------------------------------------------------------------------
def test_a_forged_finished_copy_of_a_running_job_is_not_deleted() -> None:
    server = running_job()
    decision = verdict(forged_from(server), server, NOW)
    assert not decision.delete
    assert "not finished" in decision.reason


def test_a_request_whose_uid_differs_from_the_server_copy_is_not_deleted() -> None:
    server = finished(running_job())
    claimed = copy.deepcopy(server)
    claimed["metadata"]["uid"] = "uid-of-a-predecessor"
    assert not verdict(claimed, server, NOW).delete


def test_a_request_without_a_uid_is_not_deleted() -> None:
    server = finished(running_job())
    claimed = copy.deepcopy(server)
    del claimed["metadata"]["uid"]
    assert not verdict(claimed, server, NOW).delete


def test_a_job_the_apiserver_no_longer_has_is_not_deleted() -> None:
    assert not verdict(finished(running_job()), None, NOW).delete


def test_the_server_copys_ttl_counts_not_the_requests() -> None:
    server = finished(running_job(ttl=3600))
    claimed = with_run_policy(server, ttlSecondsAfterFinished=0)
    decision = verdict(claimed, server, NOW)
    assert not decision.delete
    assert "not reached its TTL" in decision.reason


def test_the_server_copys_completion_time_counts_not_the_requests() -> None:
    server = finished(running_job(ttl=60), at_seconds=90)
    claimed = finished(server, at_seconds=0)
    decision = verdict(claimed, server, NOW)
    assert not decision.delete
    assert "not reached its TTL" in decision.reason


def test_a_server_copy_without_a_ttl_is_not_deleted() -> None:
    server = finished(running_job())
    del server["spec"]["runPolicy"]["ttlSecondsAfterFinished"]
    assert not verdict(server, server, NOW).delete


def test_a_finished_job_not_yet_written_back_is_checked_again_soon() -> None:
    server = running_job()
    decision = verdict(finished(server), server, NOW)
    assert not decision.delete


def test_a_suspended_job_is_not_deleted() -> None:
    server = with_run_policy(finished(running_job()), suspend=True)
    assert not verdict(server, server, NOW).delete


def test_a_job_already_being_deleted_is_not_deleted_again() -> None:
    server = finished(running_job())
    server["metadata"]["deletionTimestamp"] = stamp(50)
    assert not verdict(server, server, NOW).delete


def test_a_job_managed_by_another_controller_is_not_deleted() -> None:
    server = with_run_policy(finished(running_job()), managedBy="kueue.x-k8s.io/multikueue")
    assert not verdict(server, server, NOW).delete


def test_an_unreadable_completion_time_on_the_server_is_not_deleted() -> None:
    server = finished(running_job())
    server["status"]["completionTime"] = "yesterday"
    assert not verdict(server, server, NOW).delete


def test_a_failed_job_past_its_ttl_on_the_server_is_deleted() -> None:
    server = finished(running_job(ttl=30), ctype="Failed")
    assert verdict(server, server, NOW).delete


def test_a_succeeded_job_exactly_at_its_ttl_is_deleted() -> None:
    server = finished(running_job(ttl=90))
    assert verdict(server, server, NOW).delete


# ---- through the HTTP server -------------------------------------------------------------------
def post_sync(deleter: FakeDeleter, parent: Json, now: datetime = NOW) -> Json:
    app = create_app(Settings(), deleter, Clock(now))
    body = {"parent": parent, "children": {"Pod.v1": {}, "Service.v1": {}}}
    response = app.test_client().post("/sync", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.data
    out: Json = response.get_json()
    return out


def test_a_forged_sync_of_a_running_job_deletes_nothing() -> None:
    server = running_job()
    deleter = FakeDeleter(server=server)
    post_sync(deleter, forged_from(server))
    assert deleter.deleted == []


def test_a_sync_of_an_expired_job_deletes_the_servers_copy() -> None:
    server = finished(running_job(ttl=30))
    claimed = copy.deepcopy(server)
    claimed["metadata"]["labels"] = {"from": "the request"}
    deleter = FakeDeleter(server=server)
    post_sync(deleter, claimed)
    assert deleter.deleted == [server]


def test_a_declined_deletion_asks_metacontroller_to_check_again_soon() -> None:
    server = finished(running_job(ttl=3600))
    claimed = with_run_policy(server, ttlSecondsAfterFinished=0)
    response = post_sync(FakeDeleter(server=server), claimed)
    assert response["resyncAfterSeconds"] == RECHECK_SECONDS


def test_the_answer_to_a_sync_claiming_an_expired_ttl_does_not_depend_on_the_servers_copy() -> None:
    """A forged "finished, TTL 0" sync naming a real job's uid got back the server copy's remaining
    TTL to the millisecond (and, by the presence of resyncAfterSeconds, whether the job existed and had
    finished). Every state of the server's copy now gets the same bytes: the answer is a function of the
    request alone."""
    claimed = finished(running_job(ttl=0), at_seconds=0)
    other_uid = copy.deepcopy(claimed)
    other_uid["metadata"]["uid"] = "uid-of-a-successor"
    no_ttl = finished(running_job())
    del no_ttl["spec"]["runPolicy"]["ttlSecondsAfterFinished"]
    servers = {
        "gone": FakeDeleter(server=None),
        "another uid": FakeDeleter(server=other_uid),
        "running": FakeDeleter(server=running_job(ttl=0)),
        "3538 s of its TTL left": FakeDeleter(server=finished(running_job(ttl=3600), at_seconds=38)),
        "no TTL": FakeDeleter(server=no_ttl),
        "suspended": FakeDeleter(server=with_run_policy(finished(running_job(ttl=0)), suspend=True)),
        "expired (deleted)": FakeDeleter(server=claimed),
        "apiserver unreachable": FakeDeleter(server=claimed, error=OSError("unreachable")),
    }
    answers = {state: post_sync(deleter, claimed) for state, deleter in servers.items()}
    assert servers["expired (deleted)"].deleted == [claimed]
    distinct = {json.dumps(a, sort_keys=True) for a in answers.values()}
    assert distinct == {json.dumps(answers["gone"], sort_keys=True)}
    assert answers["gone"]["resyncAfterSeconds"] == RECHECK_SECONDS
