"""Kubeflow's job counters and the hook server's own metrics, read back from prometheus_client's registry.

Counters are global to the process, so every test reads the change it caused (`Delta`). A sync's
transitions are counted by the recorder once the apiserver (a FakeEventApi holding the request's job
unless a test says otherwise) confirms the job.
"""

from __future__ import annotations

import json
from typing import Any

from prometheus_client import REGISTRY

from hooks import metrics
from hooks.app import create_app
from hooks.recorder import Recorder
from tests.builders import job, replica, with_run_policy
from tests.controller.fakes import Cluster, at
from tests.hooks.test_http import Clock, FakeDeleter
from tests.hooks.test_recorder import DRAIN_SECONDS, FakeEventApi
from trainop.job.settings import Settings
from trainop.jsontypes import Json


class Delta:
    """The change of one sample between construction and `value()`."""

    def __init__(self, name: str, **labels: str) -> None:
        self.name, self.labels = name, labels
        self.start = self._read()

    def _read(self) -> float:
        return REGISTRY.get_sample_value(self.name, self.labels) or 0.0

    def value(self) -> float:
        return self._read() - self.start


def counter(what: str, namespace: str, framework: str) -> Delta:
    return Delta(f"training_operator_jobs_{what}_total", job_namespace=namespace, framework=framework)


def post(app: Any, body: Json, path: str = "/sync") -> Json:
    response = app.test_client().post(path, data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.data
    out: Json = response.get_json()
    return out


def app(deleter: FakeDeleter | None = None, seconds: float = 0) -> Any:
    return create_app(Settings(), deleter, Clock(at(seconds)))


def counted(body: Json, server: Json | None = None, on_server: bool = True) -> None:
    """POST /sync `body` to a hook whose apiserver holds `server` (the request's job by default, none
    if not `on_server`), and wait until the recorder has checked it."""
    api = FakeEventApi((server or body["parent"]) if on_server else None)
    recorder = Recorder(api, clock=Clock(at(0)))
    post(create_app(Settings(), None, Clock(at(0)), recorder=recorder), body)
    assert recorder.drain(DRAIN_SECONDS)


def tf_job(name: str, namespace: str = "metrics-ns", **run_policy: Any) -> Json:
    out = job("TFJob", name=name, namespace=namespace, Worker=1)
    return with_run_policy(out, **run_policy) if run_policy else out


def test_a_new_job_counts_as_created_once_with_kubeflows_labels() -> None:
    created = counter("created", "metrics-ns", "tensorflow")
    cluster = Cluster(tf_job("created-once"))
    counted(cluster.request())
    assert created.value() == 1


def test_a_resync_of_a_job_already_created_counts_nothing() -> None:
    cluster = Cluster(tf_job("created-then-resynced"))
    cluster.sync()
    created = counter("created", "metrics-ns", "tensorflow")
    counted(cluster.request())
    assert created.value() == 0


def test_a_retried_sync_whose_status_was_never_written_counts_once_per_process() -> None:
    created = counter("created", "metrics-ns", "tensorflow")
    body = Cluster(tf_job("retried")).request()
    counted(body)
    counted(body)
    assert created.value() == 1


def test_the_framework_label_is_kubeflows_framework_name() -> None:
    created = counter("created", "metrics-ns", "pytorch")
    counted(Cluster(job("PyTorchJob", name="pt-label", namespace="metrics-ns", Master=1)).request())
    assert created.value() == 1


def test_a_job_that_succeeds_counts_as_successful_once() -> None:
    successful = counter("successful", "metrics-ns", "tensorflow")
    cluster = Cluster(tf_job("succeeds"))
    cluster.sync()
    cluster.succeed()
    body = cluster.request()
    counted(body)
    cluster.sync(5)  # Metacontroller wrote the finished status back
    counted(cluster.request())
    assert successful.value() == 1


def test_a_job_that_fails_counts_as_failed_and_not_successful() -> None:
    failed = counter("failed", "metrics-ns", "tensorflow")
    successful = counter("successful", "metrics-ns", "tensorflow")
    cluster = Cluster(tf_job("fails"))
    cluster.sync()
    cluster.fail()
    counted(cluster.request())
    assert (failed.value(), successful.value()) == (1, 0)


def test_each_failed_pod_recreated_counts_as_one_restart() -> None:
    restarted = counter("restarted", "metrics-ns", "tensorflow")
    spec = job(
        "TFJob",
        name="restarts",
        namespace="metrics-ns",
        Worker=replica("TFJob", 2, restartPolicy="OnFailure"),
    )
    cluster = Cluster(spec)
    cluster.sync()
    cluster.run()
    cluster.fail()
    counted(cluster.request())
    counted(cluster.request())
    assert restarted.value() == 2


def test_a_ttl_deletion_counts_as_deleted() -> None:
    deleted = counter("deleted", "metrics-ns", "tensorflow")
    cluster = Cluster(tf_job("expires", ttlSecondsAfterFinished=0))
    cluster.sync()
    cluster.succeed()
    cluster.sync(5)
    body = cluster.request()
    post(app(FakeDeleter(server=body["parent"]), seconds=60), body)
    assert deleted.value() == 1


def test_a_declined_ttl_deletion_counts_nothing() -> None:
    deleted = counter("deleted", "metrics-ns", "tensorflow")
    cluster = Cluster(tf_job("forged", ttlSecondsAfterFinished=0))
    cluster.sync()
    cluster.succeed()
    cluster.sync(5)
    post(app(FakeDeleter(server=None), seconds=60), cluster.request())
    assert deleted.value() == 0


def test_sync_latency_and_request_size_are_observed_per_kind() -> None:
    count = Delta("trainop_hook_duration_seconds_count", hook="sync", kind="TFJob")
    size = Delta("trainop_hook_request_size_bytes_sum", hook="sync", kind="TFJob")
    body = Cluster(tf_job("observed")).request()
    post(app(), body)
    assert count.value() == 1
    assert size.value() == len(json.dumps(body))


def test_finalize_is_observed_under_its_own_hook_label() -> None:
    count = Delta("trainop_hook_duration_seconds_count", hook="finalize", kind="TFJob")
    post(app(), Cluster(tf_job("finalized")).request(), "/finalize")
    assert count.value() == 1


def test_bad_requests_are_counted_by_status_code() -> None:
    bad = Delta("trainop_hook_requests_total", hook="sync", code="400")
    app().test_client().post("/sync", data=b"{", content_type="application/json")
    assert bad.value() == 1


def test_unknown_paths_share_one_label_value() -> None:
    other = Delta("trainop_hook_requests_total", hook="other", code="404")
    app().test_client().post("/sync/../../anything", data=b"{}")
    app().test_client().get("/nope")
    assert other.value() == 2


def test_the_seen_set_forgets_the_least_recently_used_key_first() -> None:
    seen = metrics.Seen(size=2)
    assert [seen.first_time(k) for k in ("a", "b", "a", "c", "b", "a")] == [
        True,
        True,
        False,
        True,  # evicts b, the least recently used
        True,
        True,
    ]


# ---- only what the apiserver confirms, in a bounded number of series -------------------------------
def test_a_sync_naming_a_job_the_apiserver_does_not_have_counts_nothing() -> None:
    created = counter("created", "forged-ns", "tensorflow")
    counted(Cluster(tf_job("forged", namespace="forged-ns")).request(), on_server=False)
    assert created.value() == 0


def test_a_sync_whose_uid_is_not_the_apiservers_counts_nothing() -> None:
    created = counter("created", "metrics-ns", "tensorflow")
    body = Cluster(tf_job("other-uid")).request()
    server = {**body["parent"], "metadata": {**body["parent"]["metadata"], "uid": "the-real-one"}}
    counted(body, server=server)
    assert created.value() == 0


def test_a_sync_whose_spec_is_not_the_apiservers_counts_nothing() -> None:
    created = counter("created", "metrics-ns", "tensorflow")
    body = Cluster(tf_job("other-spec")).request()
    server = Cluster(job("TFJob", name="other-spec", namespace="metrics-ns", Worker=2)).request()["parent"]
    counted(body, server={**server, "metadata": body["parent"]["metadata"]})
    assert created.value() == 0


def test_a_hook_without_api_credentials_counts_no_transition() -> None:
    created = counter("created", "metrics-ns", "tensorflow")
    post(app(), Cluster(tf_job("unconfirmed")).request())
    assert created.value() == 0


def test_a_counter_past_its_series_limit_counts_new_namespaces_as_other() -> None:
    series = metrics.Series(limit=2)
    overflow = Delta("trainop_hook_metric_series_overflow_total", metric="created")
    other = counter("created", "other", "tensorflow")
    for i in range(5):
        parent = tf_job(f"j{i}", namespace=f"series-{i}")
        parent["metadata"]["uid"] = f"series-uid-{i}"
        metrics.count_confirmed(parent, [("created",)], metrics.Seen(), series)
    samples = [
        REGISTRY.get_sample_value(
            "training_operator_jobs_created_total",
            {"job_namespace": f"series-{i}", "framework": "tensorflow"},
        )
        for i in range(5)
    ]
    assert samples == [1, 1, None, None, None]
    assert (other.value(), overflow.value()) == (3, 3)
