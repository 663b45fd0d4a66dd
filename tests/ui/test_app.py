"""The web app over run folders, through flask's test client: pages, streams, writes and their guards."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask import Flask, request

from tests.ui.helpers import pod, pytorch, record_tensorboard, with_status, write_run
from trainop.extensions.tensorboard import ANNOTATION as TENSORBOARD
from trainop.ui.app import create_app
from trainop.ui.auth import Authenticator, AuthSettings
from trainop.ui.links import Link
from trainop.ui.runs import Runs
from trainop.ui.settings import UiSettings
from trainop.ui.views.shown import row_id


def client(root: Path, **settings):
    return create_app(Runs(root), UiSettings(poll_seconds=0.01, **settings)).test_client()


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf-token" content="([^"]+)"', html)
    assert match
    return match.group(1)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "runs"


def test_the_list_shows_each_run_with_its_state_and_replica_counts(root: Path):
    write_run(root, "mnist-1", with_status(pytorch("mnist"), ("Running", "PyTorchJobRunning"),
                                          replicaStatuses={"Worker": {"active": 2}}))  # fmt: skip
    html = client(root).get("/").text
    assert "PyTorchJobRunning" in html
    assert 'Worker <b class="active">2</b>/<b class="succeeded">0</b>/<b class="failed">0</b>' in html


def test_the_list_never_carries_a_jobs_spec(root: Path):
    obj = with_status(pytorch("mnist"), ("Running", "R"))
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = (
        "secret-image:1"
    )
    write_run(root, "mnist-1", obj)
    assert "secret-image" not in client(root).get("/").text


def test_a_filtered_htmx_request_gets_only_the_table(root: Path):
    write_run(root, "a", with_status(pytorch("a"), ("Failed", "F")))
    write_run(root, "b", with_status(pytorch("b"), ("Running", "R")))
    answer = client(root).get("/?state=Failed", headers={"HX-Request": "true", "HX-Target": "jobs"})
    assert "<html" not in answer.text
    assert 'data-key="a"' in answer.text and 'data-key="b"' not in answer.text


def test_a_jobs_page_shows_its_pods_exit_codes_timeline_and_merged_log(root: Path):
    failed = with_status(pytorch("mnist"), ("Created", "C"), ("Failed", "BackoffLimitExceeded"))
    write_run(root, "mnist-1", failed, pods=[pod("mnist-worker-0", "Failed", restarts=1, exit_code=3)],
              merged="[worker-0] step 1\n[worker-0] boom\n")  # fmt: skip
    html = client(root).get("/job/mnist-1").text
    assert "<svg" in html and "worker-0" in html
    assert "3 (Error)" in html
    assert "[worker-0] step 1\n[worker-0] boom\n" in html


def test_one_containers_log_is_shown_alone(root: Path):
    write_run(
        root, "mnist-1", pytorch("mnist"), logs={"mnist-worker-0/pytorch": "only mine\n"}, merged="[x] all\n"
    )
    html = client(root).get("/job/mnist-1?log=mnist-worker-0/pytorch").text
    assert "only mine" in html and "[x] all" not in html


def test_an_unknown_run_or_a_path_outside_the_runs_is_404(root: Path):
    write_run(root, "a", pytorch("a"))
    c = client(root)
    assert c.get("/job/nope").status_code == 404
    assert c.get("/job/../a").status_code == 404


def test_the_list_stream_sends_the_cells_of_the_listed_rows_then_only_changes(root: Path):
    workdir = write_run(root, "a", with_status(pytorch("a"), ("Running", "R")), live=True)
    answer = client(root).get("/stream/list?key=a")
    body = answer.response
    assert next(body).startswith(b"retry:")
    first = next(body).decode()
    assert first.startswith("event: cells") and f"{row_id('a')}-state" in first and "Running" in first
    assert next(body) == b": idle\n\n"
    record = (workdir / "run.json").read_text().replace('"Running"', '"Succeeded"')
    (workdir / "run.json").write_text(record)
    changed = next(body).decode()
    assert "Succeeded" in changed and f"{row_id('a')}-replicas" not in changed
    answer.close()


def test_the_log_stream_starts_with_the_last_lines_then_follows(root: Path):
    workdir = write_run(root, "a", pytorch("a"), merged="[w] one\n[w] two\n", live=True)
    answer = client(root).get("/stream/logs/a")
    body = answer.response
    next(body)
    assert next(body) == b'event: reset\ndata: ["[w] one", "[w] two"]\n\n'
    with (workdir / "merged.log").open("a") as f:
        f.write("[w] three\n")
    assert b'event: lines\ndata: ["[w] three"]' in b"".join(next(body) for _ in range(2))
    answer.close()


def test_streams_beyond_the_bound_are_refused_with_503(root: Path):
    write_run(root, "a", pytorch("a"), live=True)
    c = create_app(Runs(root), UiSettings(max_streams=1, poll_seconds=0.01)).test_client()
    first = c.get("/stream/list?key=a")
    assert c.get("/stream/list?key=a").status_code == 503
    first.close()
    assert c.get("/stream/list?key=a").status_code == 200


def test_a_read_only_ui_shows_no_actions_and_refuses_a_write_with_403(root: Path):
    workdir = write_run(root, "a", pytorch("a"))
    c = client(root)
    page = c.get("/job/a").text
    assert 'class="actions"' not in page
    assert c.post("/action/delete/a", data={"csrf": csrf_of(page)}).status_code == 403
    assert workdir.exists()


def test_a_write_without_the_pages_csrf_token_is_refused(root: Path):
    workdir = write_run(root, "a", pytorch("a"))
    c = client(root, writable=True)
    c.get("/job/a")
    assert c.post("/action/delete/a", data={"csrf": "forged"}).status_code == 403
    assert workdir.exists()


def test_a_write_from_another_origin_is_refused_even_with_the_token(root: Path):
    workdir = write_run(root, "a", pytorch("a"))
    c = client(root, writable=True)
    token = csrf_of(c.get("/job/a").text)
    answer = c.post("/action/delete/a", data={"csrf": token}, headers={"Origin": "http://evil.example"})
    assert answer.status_code == 403
    assert workdir.exists()


def test_deleting_a_finished_run_removes_its_folder(root: Path):
    workdir = write_run(root, "a", pytorch("a"))
    c = client(root, writable=True)
    token = csrf_of(c.get("/job/a").text)
    answer = c.post("/action/delete/a", data={"csrf": token})
    assert answer.status_code == 303 and not workdir.exists()


def test_a_live_run_is_not_deleted(root: Path):
    workdir = write_run(root, "a", pytorch("a"), live=True)
    c = client(root, writable=True)
    token = csrf_of(c.get("/job/a").text)
    answer = c.post("/action/delete/a", data={"csrf": token}, follow_redirects=True)
    assert "still going: stop it first" in answer.text and workdir.exists()


def test_the_wizard_puts_an_admission_message_at_the_field_it_names(root: Path):
    html = client(root).post("/new", data={"kind": "PyTorchJob", "name": "ok", "Worker.replicas": "-1",
                                           "Worker.image": "python:3.11"}).text  # fmt: skip
    assert re.search(
        r'id="err-Worker-replicas"[^>]*>Invalid value: -1: must be greater than or equal to 0', html
    )


def test_the_wizard_says_which_field_is_not_a_number(root: Path):
    html = client(root).post("/new", data={"kind": "PyTorchJob", "name": "ok", "Worker.replicas": "two"}).text
    assert re.search(r"id=\"err-Worker-replicas\"[^>]*>must be a whole number, not &#39;two&#39;", html)


def test_a_valid_wizard_form_shows_its_yaml_and_no_error(root: Path):
    form = {
        "kind": "PyTorchJob",
        "name": "ok",
        "Worker.replicas": "2",
        "Worker.image": "python:3.11",
        "Worker.gpu": "1",
    }
    html = client(root).post("/new", data=form).text
    assert 'class="error"' not in html
    assert "nvidia.com/gpu: &#39;1&#39;" in html


def test_proxy_auth_without_the_user_header_is_401_and_with_it_names_the_user(root: Path):
    c = client(root, auth=AuthSettings("proxy", "X-Forwarded-User", proxy_secret="from-the-proxy"))
    proxy = {"X-Trainop-Proxy-Secret": "from-the-proxy"}
    assert c.get("/", headers=proxy).status_code == 401
    assert "signed in as alice" in c.get("/", headers={**proxy, "X-Forwarded-User": "alice"}).text


def test_configured_links_are_expanded_over_the_jobs_fields(root: Path):
    write_run(root, "a", pytorch("mnist", "team-a"))
    link = Link(
        "Grafana", "job", "https://grafana.example/d/x?var-ns=${metadata.namespace}&var-job=${metadata.name}"
    )
    html = client(root, links=(link,)).get("/").text
    assert 'href="https://grafana.example/d/x?var-ns=team-a&amp;var-job=mnist"' in html


def test_a_finished_run_offers_no_stop(root: Path):
    write_run(root, "a", pytorch("a"))
    page = client(root, writable=True).get("/job/a").text
    assert "/action/stop/a" not in page and "/action/delete/a" in page


def test_the_wizard_downloads_the_job_as_yaml(root: Path):
    form = {
        "kind": "PyTorchJob",
        "name": "mine",
        "Worker.replicas": "1",
        "Worker.image": "python:3.11",
        "do": "download",
    }
    answer = client(root).post("/new", data=form)
    assert answer.headers["Content-Disposition"] == 'attachment; filename="mine.yaml"'
    assert "kind: PyTorchJob" in answer.text and "image: python:3.11" in answer.text


def test_a_local_run_with_only_the_annotation_shows_no_tensorboard_link(root: Path):
    obj = pytorch("a")
    obj["metadata"]["annotations"] = {TENSORBOARD: "pvc://logs"}
    write_run(root, "a", obj)
    c = client(root)
    assert "TensorBoard" not in c.get("/").text and "TensorBoard" not in c.get("/job/a").text


def test_a_local_runs_recorded_tensorboard_is_linked_on_its_row_and_its_page(root: Path):
    folder = write_run(root, "a", pytorch("a"))
    record_tensorboard(folder, {"url": "http://127.0.0.1:6123/"})
    c = client(root)
    link = '<a href="http://127.0.0.1:6123/" rel="noopener" target="_blank">TensorBoard</a>'
    assert link in c.get("/").text
    assert link in c.get("/job/a").text


@pytest.mark.parametrize("board", [{"url": "javascript:alert(1)"}, {"url": 6006}, "http://127.0.0.1:1/"])
def test_a_recorded_tensorboard_that_is_not_an_http_address_is_not_linked(root: Path, board: object):
    record_tensorboard(write_run(root, "a", pytorch("a")), board)
    c = client(root)
    assert "TensorBoard" not in c.get("/").text and "TensorBoard" not in c.get("/job/a").text


def test_proxy_groups_are_read_from_every_line_of_the_groups_header():
    settings = AuthSettings("proxy", "X-Forwarded-User", "X-Forwarded-Groups", proxy_secret="s",
                            groups=("ml", "readers", "b"))  # fmt: skip
    auth = Authenticator(settings)
    groups = [("X-Forwarded-Groups", "ml, readers"), ("X-Forwarded-Groups", "b")]
    headers = [("X-Trainop-Proxy-Secret", "s"), ("X-Forwarded-User", "alice"), *groups]
    with Flask(__name__).test_request_context(headers=headers):
        assert auth.user(request).groups == ("ml", "readers", "b")


LINKS = (
    Link("Grafana", "job", "https://grafana.example/d/jobs?var-namespace=${metadata.namespace}&var-job=${metadata.name}"),
    Link("Replica logs", "replica", "https://logs.example/?job=${metadata.name}&type=${replica.type}"),
    Link("Pod metrics", "pod", "https://grafana.example/d/pod?var-pod=${metadata.name}&var-job=${job.metadata.name}"),
)  # fmt: skip


def test_a_jobs_page_shows_its_job_links(root: Path):
    write_run(root, "a", pytorch("mnist", "team-a"), pods=[pod("mnist-worker-0")])
    page = client(root, links=LINKS).get("/job/a").text
    assert 'href="https://grafana.example/d/jobs?var-namespace=team-a&amp;var-job=mnist"' in page


def test_replica_links_are_expanded_per_replica_type_on_a_jobs_page(root: Path):
    write_run(root, "a", with_status(pytorch("mnist", "team-a"), ("Running", "R"), replicaStatuses={
        "Master": {"active": 1}, "Worker": {"active": 2}}), pods=[pod("mnist-worker-0")])  # fmt: skip
    page = client(root, links=LINKS).get("/job/a").text
    assert 'href="https://logs.example/?job=mnist&amp;type=Master"' in page
    assert 'href="https://logs.example/?job=mnist&amp;type=Worker"' in page


def test_pod_links_are_expanded_over_each_pod_and_its_job(root: Path):
    write_run(root, "a", pytorch("mnist", "team-a"), pods=[pod("mnist-worker-0"), pod("mnist-worker-1")])
    page = client(root, links=LINKS).get("/job/a").text
    assert 'href="https://grafana.example/d/pod?var-pod=mnist-worker-0&amp;var-job=mnist"' in page
    assert 'href="https://grafana.example/d/pod?var-pod=mnist-worker-1&amp;var-job=mnist"' in page


def test_replica_and_pod_links_are_not_on_the_list(root: Path):
    write_run(root, "a", pytorch("mnist", "team-a"), pods=[pod("mnist-worker-0")])
    html = client(root, links=LINKS).get("/").text
    assert "grafana.example/d/jobs" in html
    assert "logs.example" not in html and "grafana.example/d/pod" not in html


def test_the_wizard_offers_every_accelerator_profile_per_replica_type(root: Path):
    page = client(root).get("/new?kind=PyTorchJob").text
    for rtype in ("Master", "Worker"):
        assert f'name="{rtype}.accelerator"' in page and f'name="{rtype}.acceleratorCount"' in page
    assert '<option value="nvidia-gke-l4"' in page and '<option value="tpu-v5e-2x4"' in page


def test_the_wizard_shows_an_unknown_profiles_message_at_its_field(root: Path):
    form = {"kind": "PyTorchJob", "name": "a", "Worker.replicas": "1", "Worker.image": "python:3.11",
            "Worker.accelerator": "no-such-gpu", "do": "check"}  # fmt: skip
    page = client(root).post("/new", data=form).text
    at_field = r'id="err-Worker-accelerator">[^<]*&#34;no-such-gpu&#34;: unknown accelerator profile'
    assert re.search(at_field, page)


def test_every_page_names_the_packaged_favicon(root: Path):
    web = client(root)
    html = web.get("/").text
    match = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)">', html)
    assert match
    icon = web.get(match.group(1))
    assert icon.status_code == 200
    assert icon.mimetype == "image/svg+xml"
    assert icon.data.startswith(b"<svg")
