"""The cluster source against a small fake apiserver: calls made as the user, access filtering, logs."""

from __future__ import annotations

import http.server
import json
import re
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.ui.fakeapi import FakeApi, serving, with_tensorboard
from tests.ui.helpers import pytorch
from trainop.controller.podgroups import KUBERNETES_KEY, PLUGINS_KEY, VOLCANO_KEY
from trainop.jsontypes import Json
from trainop.kubeclient import KubeClient
from trainop.ui import cluster as cluster_module
from trainop.ui.app import create_app
from trainop.ui.auth import AuthSettings
from trainop.ui.cluster import Cluster, field_errors
from trainop.ui.scheduling import POD_GROUP_APIS, WORKLOAD_API
from trainop.ui.settings import UiSettings
from trainop.ui.source import Container, NotAllowed, User
from trainop.ui.summary import summarize
from trainop.ui.wizard import Form

# Proxy sign-in as the chart configures it: the proxy proves itself with the secret it shares with the UI.
PROXY = AuthSettings("proxy", "X-Forwarded-User", proxy_secret="from-the-proxy")
FROM_PROXY = {"X-Trainop-Proxy-Secret": "from-the-proxy"}


@pytest.fixture
def api() -> Iterator[tuple[FakeApi, Cluster]]:
    fake = FakeApi()
    with serving(fake) as client:
        yield fake, Cluster(client)


def test_a_proxy_users_calls_carry_the_impersonation_headers(api: tuple[FakeApi, Cluster]) -> None:
    fake, cluster = api
    cluster.detail(User("alice", ("team-a",)), "team-a/PyTorchJob/mnist")
    for _, _, headers in fake.seen:
        assert headers["Impersonate-User"] == "alice"
        assert headers["Impersonate-Group"] == "team-a"


class HeaderLines(http.server.BaseHTTPRequestHandler):
    """Records each request's Impersonate-Group lines as sent: a WSGI server would join them with commas."""

    seen: list[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.headers.get_all("Impersonate-Group") or [])
        body = json.dumps({"items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_every_group_of_a_proxy_user_is_impersonated_on_a_line_of_its_own() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HeaderLines)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = KubeClient(server=f"http://127.0.0.1:{server.server_port}", context=ssl.create_default_context())
    try:
        Cluster(client).as_user(User("alice", ("team-a", "ml,readers", "b"))).get("/x")
    finally:
        server.shutdown()
    assert HeaderLines.seen == [["team-a", "ml,readers", "b"]]


@pytest.mark.parametrize(
    "user",
    [User("system:admin"), User("alice", ("team-a", "system:masters")), User("system:serviceaccount:a:b")],
)
def test_no_system_user_or_group_is_ever_impersonated(user: User) -> None:
    client = KubeClient(server="http://127.0.0.1:9", context=ssl.create_default_context())
    with pytest.raises(NotAllowed, match="never acts as 'system:"):
        Cluster(client).as_user(user)


def test_a_token_users_calls_carry_their_own_token_and_no_impersonation(api: tuple[FakeApi, Cluster]) -> None:
    fake, cluster = api
    cluster.detail(User("bob", (), "bobs-token"), "team-a/PyTorchJob/mnist")
    for _, _, headers in fake.seen:
        assert headers["Authorization"] == "Bearer bobs-token"
        assert "Impersonate-User" not in headers


def test_a_jobs_page_holds_only_the_pods_that_job_owns(api: tuple[FakeApi, Cluster]) -> None:
    _, cluster = api
    detail = cluster.detail(User("alice"), "team-a/PyTorchJob/mnist")
    assert detail is not None
    assert [p["metadata"]["name"] for p in detail.pods] == ["mnist-worker-0", "mnist-worker-1"]


def test_a_403_of_the_cluster_is_not_allowed(api: tuple[FakeApi, Cluster]) -> None:
    _, cluster = api
    with pytest.raises(NotAllowed):
        cluster.detail(User("alice"), "team-a/PyTorchJob/secret")


def test_the_list_holds_only_the_namespaces_the_user_may_list(api: tuple[FakeApi, Cluster]) -> None:
    _, cluster = api
    for ns in ("team-a", "team-b"):
        key = f"{ns}/PyTorchJob/mnist"
        cluster.jobs["PyTorchJob"][key] = summarize(pytorch("mnist", ns), key)
    assert [s.namespace for s in cluster.summaries(User("alice"))] == ["team-a"]


MNIST = "team-a/PyTorchJob/mnist"


def read_logs(cluster: Cluster, container: Container | None = None) -> list[str]:
    detail = cluster.detail(User("alice"), MNIST)
    assert detail is not None
    return cluster.read_logs(User("alice"), MNIST, detail, container, 10)


def test_merged_logs_prefix_every_pods_lines_as_trainop_run_does(api: tuple[FakeApi, Cluster]) -> None:
    _, cluster = api
    assert read_logs(cluster) == [
        "[worker-0] mnist-worker-0 line 1", "[worker-0] mnist-worker-0 line 2",
        "[worker-1] mnist-worker-1 line 1", "[worker-1] mnist-worker-1 line 2",
    ]  # fmt: skip


def test_one_containers_log_has_no_prefix(api: tuple[FakeApi, Cluster]) -> None:
    _, cluster = api
    lines = read_logs(cluster, Container("mnist-worker-1", "pytorch"))
    assert lines == ["mnist-worker-1 line 1", "mnist-worker-1 line 2"]


def test_a_page_reads_a_log_once_by_its_tail_and_size_without_following_it(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    read_logs(cluster, Container("mnist-worker-1", "pytorch"))
    [(_, path, _)] = [s for s in fake.seen if "/log?" in s[1]]
    assert path == (
        "/api/v1/namespaces/team-a/pods/mnist-worker-1/log?container=pytorch&tailLines=10&limitBytes=262144"
    )


def example_job() -> tuple[Json, list[Json]]:
    form = Form({**Form.of_example("pytorch").values, "namespace": "team-a"})
    job, _ = form.job()
    return job, form.companions(job)


def test_an_examples_job_is_judged_then_its_configmap_then_the_job_created(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    job, companions = example_job()
    assert cluster.create(User("alice"), job, False, companions) == (
        "created (with ConfigMap pytorch-dist-digits-script)"
    )
    assert fake.writes == [
        "POST /apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs?dryRun=All",
        "POST /api/v1/namespaces/team-a/configmaps",
        "POST /apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs",
    ]


WORKER_IMAGE = "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image"


def test_a_webhooks_refusal_on_the_cluster_is_shown_at_each_field_it_names(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    fake.refusal = (
        'admission webhook "validate.trainop.dev" denied the request: '
        f"{WORKER_IMAGE}: Required value: the registry allows only signed images; metadata.name: taken"
    )
    settings = UiSettings(writable=True, auth=PROXY)
    client = create_app(cluster, settings).test_client()
    headers = {**FROM_PROXY, "X-Forwarded-User": "alice"}
    csrf = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/new", headers=headers).text)
    assert csrf
    form = {"kind": "PyTorchJob", "name": "a", "namespace": "team-a", "Worker.replicas": "1",
            "Worker.image": "python:3.11", "do": "dry-run", "csrf": csrf.group(1)}  # fmt: skip
    page = client.post("/new", data=form, headers={**headers, "Origin": "http://localhost"}).text
    assert re.search(r'id="err-Worker-image">Required value: the registry allows only signed images<', page)
    assert re.search(r'id="err-name">taken<', page)


@pytest.mark.parametrize(
    ("message", "errors"),
    [
        ('PyTorchJob.kubeflow.org "a" is invalid: [spec.a: Invalid value: 1: no, spec.b[W].replicas: Needed]',
         [("spec.a", "Invalid value: 1: no"), ("spec.b[W].replicas", "Needed")]),
        ('namespaces "nope" not found', [("", 'namespaces "nope" not found')]),
        ("admission webhook denied the request: the quota is used up", [
            ("", "admission webhook denied the request: the quota is used up")]),
    ],
)  # fmt: skip
def test_a_refusal_is_split_into_the_fields_it_names_or_kept_whole(
    message: str, errors: list[tuple[str, str]]
):
    assert field_errors(message) == errors


def test_a_dry_run_of_an_examples_job_writes_nothing(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    job, companions = example_job()
    cluster.create(User("alice"), job, True, companions)
    assert all(w.endswith("?dryRun=All") for w in fake.writes) and len(fake.writes) == 2


def test_an_existing_configmap_of_the_example_gets_the_examples_data(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    fake.config_maps.add("pytorch-dist-digits-script")
    job, companions = example_job()
    cluster.create(User("alice"), job, False, companions)
    assert "PATCH /api/v1/namespaces/team-a/configmaps/pytorch-dist-digits-script" in fake.writes


def listed(cluster: Cluster, *jobs: Json) -> None:
    for obj in jobs:
        key = f"{obj['metadata']['namespace']}/{obj['kind']}/{obj['metadata']['name']}"
        cluster.jobs[obj["kind"]][key] = summarize(obj, key)


def test_a_listed_job_with_a_tensorboard_links_to_it_under_its_path_prefix(api: tuple[FakeApi, Cluster]):
    _, cluster = api
    listed(cluster, with_tensorboard(pytorch("board", "team-a")), pytorch("plain", "team-a"))
    page = create_app(cluster, UiSettings()).test_client().get("/").text
    assert page.count(">TensorBoard</a>") == 1
    assert 'href="/tensorboard/team-a/board/"' in page


def test_a_jobs_page_links_its_tensorboard_through_the_configured_template(api: tuple[FakeApi, Cluster]):
    _, cluster = api
    settings = UiSettings(tensorboard_url="https://tb.example/${metadata.namespace}--${metadata.name}")
    page = create_app(cluster, settings).test_client().get("/job/team-a/PyTorchJob/board").text
    assert 'href="https://tb.example/team-a--board"' in page


def test_an_empty_tensorboard_template_shows_no_tensorboard_link(api: tuple[FakeApi, Cluster]):
    _, cluster = api
    page = (
        create_app(cluster, UiSettings(tensorboard_url="")).test_client().get("/job/team-a/PyTorchJob/board")
    )
    assert "TensorBoard" not in page.text


def test_a_writable_ui_offers_a_jobs_actions_only_to_users_rbac_lets_do_them(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    fake.writers.add("alice")
    settings = UiSettings(writable=True, auth=PROXY)
    client = create_app(cluster, settings).test_client()
    alice, bob = {**FROM_PROXY, "X-Forwarded-User": "alice"}, {**FROM_PROXY, "X-Forwarded-User": "bob"}
    page = client.get("/job/team-a/PyTorchJob/mnist", headers=alice).text
    assert (
        "/action/suspend/team-a/PyTorchJob/mnist" in page and "/action/delete/team-a/PyTorchJob/mnist" in page
    )
    page = client.get("/job/team-a/PyTorchJob/mnist", headers=bob).text
    assert "/action/" not in page


def test_the_wizard_offers_create_only_to_users_rbac_lets_create_in_the_forms_namespace(
    api: tuple[FakeApi, Cluster],
):
    fake, cluster = api
    fake.writers.add("alice")
    settings = UiSettings(writable=True, auth=PROXY)
    client = create_app(cluster, settings).test_client()
    page = client.get("/new?kind=PyTorchJob", headers={**FROM_PROXY, "X-Forwarded-User": "alice"}).text
    assert 'value="create"' in page and 'value="dry-run"' in page
    page = client.get("/new?kind=PyTorchJob", headers={**FROM_PROXY, "X-Forwarded-User": "bob"}).text
    assert 'value="create"' not in page and 'value="dry-run"' not in page
    assert "You may not create PyTorchJobs in namespace default." in page


def test_whether_a_user_may_act_is_asked_as_the_user_for_that_job(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    cluster.may(User("alice", ("team-a",)), "team-a/PyTorchJob/mnist", "delete")
    [(_, _, headers)] = [s for s in fake.seen if s[1].endswith("selfsubjectaccessreviews")]
    assert headers["Impersonate-User"] == "alice"


def pending_pods(fake: FakeApi) -> None:
    """The mnist job's pods wait to be scheduled."""
    original = fake.answer

    def answer(path: str) -> Any:
        reply = original(path)
        if path.endswith("/pods"):
            for p in reply["items"]:
                p["status"] = {"phase": "Pending"}
        return reply

    fake.app.view_functions["any"] = answer


def test_the_ui_looks_for_the_podgroups_of_every_api_the_sync_makes_them_in():
    assert {f"PodGroup.{api}" for api in POD_GROUP_APIS} == {VOLCANO_KEY, PLUGINS_KEY, KUBERNETES_KEY}


def test_a_pending_jobs_page_shows_its_podgroups_phase_and_conditions(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    fake.served.add("scheduling.volcano.sh/v1beta1")
    pending_pods(fake)
    page = create_app(cluster, UiSettings()).test_client().get("/job/team-a/PyTorchJob/mnist").text
    assert "<dt>PodGroup</dt><dd><code>mnist</code> <small>(scheduling.volcano.sh/v1beta1)</small>" in page
    assert '<span class="state pending">Pending</span>' in page
    assert "Unschedulable</dt><dd>True (NotEnoughResources): 3/3 tasks in gang unschedulable" in page


def test_the_podgroup_is_read_as_the_user(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    fake.served.add("scheduling.x-k8s.io/v1alpha1")
    pending_pods(fake)
    cluster.detail(User("alice"), "team-a/PyTorchJob/mnist")
    [headers] = [h for _, path, h in fake.seen if "/podgroups/" in path]
    assert headers["Impersonate-User"] == "alice"


def test_a_queued_jobs_page_shows_its_own_kueue_workload_pending_with_the_message(
    api: tuple[FakeApi, Cluster],
):
    fake, cluster = api
    fake.served.add(WORKLOAD_API)
    detail = cluster.detail(User("alice"), "team-a/PyTorchJob/queued")
    assert detail is not None
    [gate] = detail.scheduling
    assert (gate.what, gate.name, gate.state) == ("Workload", "pytorchjob-uid-queued", "Pending")
    assert gate.conditions[0].message.endswith("insufficient quota for cpu")


def test_scheduling_apis_that_are_not_installed_are_neither_asked_nor_shown(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    pending_pods(fake)
    answer = create_app(cluster, UiSettings()).test_client().get("/job/team-a/PyTorchJob/queued")
    assert answer.status_code == 200 and "What the scheduling waits for" not in answer.text
    assert not [path for _, path, _ in fake.seen if "/podgroups/" in path or path.endswith("/workloads")]


def test_podgroups_the_user_may_not_read_are_a_note_not_an_error(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    fake.served.add("scheduling.volcano.sh/v1beta1")
    fake.forbidden.add("podgroups")
    pending_pods(fake)
    detail = cluster.detail(User("alice"), "team-a/PyTorchJob/mnist")
    assert detail is not None and detail.scheduling == []
    assert "you may not read PodGroups (scheduling.volcano.sh/v1beta1) in this namespace" in detail.notes


def test_a_schedulers_repeated_event_shows_its_series_count_and_last_time_to_the_second(
    api: tuple[FakeApi, Cluster],
):
    fake, cluster = api
    fake.events.append({
        "involvedObject": {"kind": "Pod", "name": "mnist-worker-0", "namespace": "team-a"},
        "reason": "FailedScheduling", "type": "Warning", "message": "0/1 nodes are available",
        "eventTime": "2026-12-01T17:10:07.307548Z", "reportingComponent": "default-scheduler",
        "series": {"count": 2, "lastObservedTime": "2026-12-01T17:10:09.337611Z"},
    })  # fmt: skip
    detail = cluster.detail(User("alice"), "team-a/PyTorchJob/mnist")
    assert detail is not None
    [event] = detail.events
    assert (event.time, event.count) == ("2026-12-01T17:10:09Z", 2)


def test_a_running_jobs_page_asks_for_no_scheduling_status(api: tuple[FakeApi, Cluster]):
    fake, cluster = api
    fake.served.update(POD_GROUP_APIS)
    cluster.detail(User("alice"), "team-a/PyTorchJob/mnist")
    assert not [path for _, path, _ in fake.seen if "/podgroups/" in path]


def test_the_access_review_cache_keeps_at_most_its_capacity_of_answers(
    api: tuple[FakeApi, Cluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_module, "MAX_ACCESS_ANSWERS", 50)
    fake, cluster = api
    bounded = Cluster(cluster.client)
    for i in range(200):
        bounded.may_list(User(f"user-{i}"), "PyTorchJob", "team-a")
    assert len(bounded.access) == 50
    asked = len(fake.seen)
    assert bounded.may_list(User("user-199"), "PyTorchJob", "team-a") and len(fake.seen) == asked
