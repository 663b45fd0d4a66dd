"""The local UI's gate, through flask's test client: the token the UI prints, exchanged for a cookie; the
hosts it answers to (DNS rebinding); the origin of a write; and files only inside the runs folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from tests.ui.helpers import pytorch, write_run
from trainop.ui.app import create_app
from trainop.ui.local_access import LocalAccess, allowed_hosts, guard, new_access
from trainop.ui.runs import Runs
from trainop.ui.settings import UiSettings

PORT = 8123
BASE = f"http://127.0.0.1:{PORT}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def access() -> LocalAccess:
    return new_access("127.0.0.1", PORT)


def gated(root: Path, access: LocalAccess, writable: bool = False) -> FlaskClient:
    app = create_app(Runs(root), UiSettings(writable=writable, poll_seconds=0.01))
    guard(app, access)
    return app.test_client()


def signed_in(root: Path, access: LocalAccess, writable: bool = False) -> FlaskClient:
    c = gated(root, access, writable)
    assert c.get(f"/?token={access.token}", base_url=BASE).status_code == 303
    return c


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf-token" content="([^"]+)"', html)
    assert match
    return match.group(1)


def test_the_allowed_hosts_are_the_loopback_names_and_the_bound_address_at_the_port():
    assert allowed_hosts("127.0.0.2", 80) == {"127.0.0.1:80", "localhost:80", "[::1]:80", "127.0.0.2:80"}
    assert "[::1]:80" in allowed_hosts("::1", 80)


def test_each_ui_gets_a_token_of_its_own():
    assert new_access("127.0.0.1", PORT).token != new_access("127.0.0.1", PORT).token


def test_a_request_without_the_token_is_401_with_a_page_saying_to_open_the_printed_address(
    root: Path, access: LocalAccess
):
    write_run(root, "a", pytorch("a"), merged="secret training output\n")
    answer = gated(root, access).get("/job/a", base_url=BASE)
    assert answer.status_code == 401
    assert "open the address trainop printed" in answer.text
    assert "secret training output" not in answer.text


def test_a_wrong_token_is_401(root: Path, access: LocalAccess):
    answer = gated(root, access).get("/?token=guessed", base_url=BASE)
    assert answer.status_code == 401 and "token in this address is wrong" in answer.text
    assert "Set-Cookie" not in answer.headers


def test_the_token_is_exchanged_for_an_http_only_strict_cookie_and_dropped_from_the_address(
    root: Path, access: LocalAccess
):
    answer = gated(root, access).get(f"/job/a?log=x&token={access.token}", base_url=BASE)
    assert answer.status_code == 303
    assert answer.headers["Location"] == "/job/a?log=x"
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith(f"trainop_ui_{PORT}={access.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


def test_with_the_cookie_the_logs_are_served(root: Path, access: LocalAccess):
    write_run(root, "a", pytorch("a"), merged="training output\n")
    answer = signed_in(root, access).get("/job/a", base_url=BASE)
    assert answer.status_code == 200 and "training output" in answer.text


def test_a_cookie_with_another_value_is_401(root: Path, access: LocalAccess):
    c = gated(root, access)
    c.set_cookie(access.cookie, "forged", domain="127.0.0.1")
    assert c.get("/", base_url=BASE).status_code == 401


@pytest.mark.parametrize(
    "host", ["rebound.example:8123", "127.0.0.1:9999", "localhost", "evil.127.0.0.1.nip.io"]
)
def test_another_host_is_refused_even_with_the_token(root: Path, access: LocalAccess, host: str):
    write_run(root, "a", pytorch("a"), merged="training output\n")
    c = signed_in(root, access)
    answer = c.get(f"/job/a?token={access.token}", base_url=f"http://{host}")
    assert answer.status_code == 421
    assert "answers only to" in answer.text and "training output" not in answer.text


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"])
def test_each_loopback_name_at_the_port_is_served(root: Path, access: LocalAccess, host: str):
    c = gated(root, access)
    assert c.get(f"/?token={access.token}", base_url=f"http://{host}:{PORT}").status_code == 303


def test_healthz_answers_without_the_token_but_not_to_another_host(root: Path, access: LocalAccess):
    c = gated(root, access)
    assert c.get("/healthz", base_url=BASE).status_code == 200
    assert c.get("/healthz", base_url="http://rebound.example:8123").status_code == 421


def test_a_writable_ui_creates_nothing_for_a_request_without_the_token(root: Path, access: LocalAccess):
    root.mkdir()
    form = {"kind": "PyTorchJob", "name": "pwn", "Worker.replicas": "1", "Worker.image": "python:3.11",
            "Worker.command": "touch /tmp/pwned", "do": "create"}  # fmt: skip
    answer = gated(root, access, writable=True).post("/new", data=form, base_url=BASE)
    assert answer.status_code == 401
    assert list(root.iterdir()) == []


def test_a_writable_ui_refuses_a_write_from_another_origin_even_with_the_cookie(
    root: Path, access: LocalAccess
):
    workdir = write_run(root, "a", pytorch("a"))
    c = signed_in(root, access, writable=True)
    csrf = csrf_of(c.get("/job/a", base_url=BASE).text)
    answer = c.post(
        "/action/delete/a",
        data={"csrf": csrf},
        base_url=BASE,
        headers={"Origin": "http://rebound.example:8123"},
    )
    assert answer.status_code == 403 and "only pages of this UI" in answer.text
    assert workdir.exists()


def test_a_writable_ui_with_the_cookie_deletes_from_its_own_origin(root: Path, access: LocalAccess):
    workdir = write_run(root, "a", pytorch("a"))
    c = signed_in(root, access, writable=True)
    csrf = csrf_of(c.get("/job/a", base_url=BASE).text)
    answer = c.post("/action/delete/a", data={"csrf": csrf}, base_url=BASE, headers={"Origin": BASE})
    assert answer.status_code == 303 and not workdir.exists()


def test_a_merged_log_linked_to_etc_passwd_is_not_served(root: Path, access: LocalAccess):
    workdir = write_run(root, "a", pytorch("a"))
    (workdir / "merged.log").symlink_to("/etc/passwd")
    c = signed_in(root, access)
    page = c.get("/job/a", base_url=BASE)
    assert page.status_code == 200 and "root:" not in page.text
    assert "root:" not in c.get("/stream/logs/a", base_url=BASE).text


def test_a_containers_log_linked_out_of_the_run_is_not_served(root: Path, access: LocalAccess):
    workdir = write_run(root, "a", pytorch("a"), logs={"a-worker-0/pytorch": "mine\n"})
    log = workdir / "logs" / "a-worker-0" / "pytorch.log"
    log.unlink()
    log.symlink_to("/etc/passwd")
    answer = signed_in(root, access).get("/job/a?log=a-worker-0/pytorch", base_url=BASE)
    assert "root:" not in answer.text


def test_a_run_folder_linked_out_of_the_runs_folder_is_404(root: Path, access: LocalAccess, tmp_path: Path):
    elsewhere = write_run(tmp_path / "elsewhere", "b", pytorch("b"), merged="not under the runs\n")
    root.mkdir()
    (root / "b").symlink_to(elsewhere)
    c = signed_in(root, access)
    assert c.get("/job/b", base_url=BASE).status_code == 404
    assert "job/b" not in c.get("/", base_url=BASE).text
