"""Forged /sync calls through the shipped gunicorn configuration, with a fake apiserver holding the real
job: what the hook writes and counts is justified by the apiserver's copy, bounded and rate-limited
(docs/limits.md#events-and-metrics), and the answer to a forged call tells nothing about that copy.

The caller knows a real job's namespace, name and uid, as anyone who can read the job does.
"""

from __future__ import annotations

import copy
import http.client
import json
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from hooks.metrics import MAX_SERIES
from hooks.recorder import SPAM_BURST
from tests.builders import job
from tests.controller.fakes import Cluster
from tests.hooks.apiserver import FakeApiserver, fake_apiserver
from tests.servers import Server, serve
from trainop.job.event import MAX_MESSAGE_BYTES
from trainop.jsontypes import Json

WORKERS = 2
FORGED = 200


def real_cluster() -> Cluster:
    """The real job, synced once: its pods exist, and the apiserver holds it as `cluster.job`."""
    cluster = Cluster(job("PyTorchJob", name="victim", namespace="team-a", Master=1, Worker=1))
    cluster.sync()
    return cluster


def post(server: Server, body: Json) -> tuple[int, bytes]:
    """One call on a fresh connection, so gunicorn's workers share them."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("POST", "/sync", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    out = response.status, response.read()
    conn.close()
    return out


def hooks(tmp_path: Path, fake: FakeApiserver, workers: int = WORKERS) -> Any:
    return serve("hooks", tmp_path, workers=workers, TRAINOP_KUBECONFIG=str(fake.kubeconfig))


def with_waiting_worker(cluster: Cluster, reason: str, message: str) -> Json:
    """A sync request whose (forged) worker pod waits with `reason` and `message`."""
    body = cluster.request()
    [worker] = [p for p in body["children"]["Pod.v1"].values() if p["metadata"]["name"] == "victim-worker-0"]
    state = {"waiting": {"reason": reason, "message": message}}
    worker["status"] = {
        "phase": "Pending",
        "containerStatuses": [{"name": "pytorch", "restartCount": 0, "state": state}],
    }
    return body


def test_200_forged_syncs_with_unsupported_replica_types_write_no_event(tmp_path: Path) -> None:
    cluster = real_cluster()
    with fake_apiserver(tmp_path, [cluster.job]) as fake, hooks(tmp_path, fake) as server:
        for i in range(FORGED):
            body = cluster.request()
            body["parent"]["spec"]["pytorchReplicaSpecs"][f"Evil{i}"] = {"replicas": 1}
            assert post(server, body)[0] == 200
        fake.settle(job_reads=FORGED)
        assert fake.job_events("victim") == []


def test_200_forged_pod_messages_write_at_most_the_per_job_burst_in_each_process(tmp_path: Path) -> None:
    cluster = real_cluster()
    with fake_apiserver(tmp_path, [cluster.job]) as fake, hooks(tmp_path, fake) as server:
        for i in range(FORGED):
            assert post(server, with_waiting_worker(cluster, "ImagePullBackOff", f"pwned {i}"))[0] == 200
        fake.settle(job_reads=FORGED)
        warnings = [e for e in fake.job_events("victim") if e["type"] == "Warning"]
        print(f"\n{FORGED} forged syncs with made-up pod messages wrote {len(warnings)} Warning Events")
        assert len(warnings) <= SPAM_BURST * WORKERS


def test_a_forged_waiting_message_of_1_4_mb_is_stored_cut_to_1_kib(tmp_path: Path) -> None:
    cluster = real_cluster()
    with fake_apiserver(tmp_path, [cluster.job]) as fake, hooks(tmp_path, fake) as server:
        assert post(server, with_waiting_worker(cluster, "ImagePullBackOff", "x" * 1_400_094))[0] == 200
        fake.settle(job_reads=1)
        [warning] = [e for e in fake.job_events("victim") if e["type"] == "Warning"]
        assert len(warning["message"].encode()) == MAX_MESSAGE_BYTES


def test_a_forged_reason_that_is_not_a_word_writes_no_event(tmp_path: Path) -> None:
    cluster = real_cluster()
    # A later sync of another real job, answered by the same single process: its writer handles batches
    # in order, so once the apiserver has been asked about this one, it has seen any earlier batch.
    sentinel = Cluster(job("PyTorchJob", name="sentinel", namespace="team-a", Master=1))
    with fake_apiserver(tmp_path, [cluster.job, sentinel.job]) as fake, hooks(tmp_path, fake, 1) as server:
        assert post(server, with_waiting_worker(cluster, "Pwned\u202e!", "Back-off pulling image"))[0] == 200
        assert post(server, sentinel.request())[0] == 200
        fake.settle(job_reads=1)
        assert fake.job_events("sentinel") != []
        assert fake.job_events("victim") == []


def test_the_answer_to_a_forged_sync_is_the_same_whether_the_apiserver_has_the_job_or_not(
    tmp_path: Path,
) -> None:
    cluster = real_cluster()
    forged = cluster.request()
    forged["parent"]["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 3600}
    forged["parent"]["status"] = {
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}],
        "completionTime": "2024-05-01T12:00:00Z",
    }
    answers = []
    for held in ([cluster.job], []):
        with fake_apiserver(tmp_path, held) as fake, hooks(tmp_path, fake, workers=1) as server:
            answers.append(post(server, copy.deepcopy(forged)))
    assert answers[0] == answers[1]


def series(text: str, name: str) -> dict[str, float]:
    """job_namespace -> value of every sample `name` in a Prometheus exposition."""
    return {
        s.labels["job_namespace"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def namespaced_job(namespace: str) -> Json:
    out = job("XGBoostJob", name="j", namespace=namespace, Master=1)
    out["metadata"]["uid"] = f"uid-{namespace}"
    return out


# The recorder's queue holds 1000 batches and drops (and counts) what does not fit; a loaded machine's
# writer thread can fall that far behind 3000 back-to-back syncs. Waiting for it every 500 keeps the
# queue below its bound, so what is measured is the series limit, not the machine's speed.
PACE = 500


def sync_many(server: Any, fake: FakeApiserver, prefix: str, count: int) -> None:
    for i in range(count):
        assert post(server, {"parent": namespaced_job(f"{prefix}-{i}"), "children": {}})[0] == 200
        if (i + 1) % PACE == 0 or i + 1 == count:
            fake.settle(job_reads=i + 1)


def test_3000_forged_namespaces_add_no_series(tmp_path: Path) -> None:
    with fake_apiserver(tmp_path) as fake, hooks(tmp_path, fake) as server:
        sync_many(server, fake, "forged", 3000)
        assert series(server.metrics(), "training_operator_jobs_created_total") == {}


def test_3000_real_namespaces_keep_at_most_the_series_limit_and_lose_no_count(tmp_path: Path) -> None:
    with (
        fake_apiserver(tmp_path, lambda namespace, name: namespaced_job(namespace)) as fake,
        hooks(tmp_path, fake, workers=1) as server,
    ):
        sync_many(server, fake, "real", 3000)
        created = series(server.metrics(), "training_operator_jobs_created_total")
        assert len(created) == MAX_SERIES + 1
        assert (created["other"], sum(created.values())) == (3000 - MAX_SERIES, 3000)
