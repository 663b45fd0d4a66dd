"""The real `trainop ui RUNS_DIR` and `trainop run --ui` processes on a port: the attacks on the local UI's
gate, over HTTP, leave no harm."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.local.runs import replica, write_job
from tests.local.runs import start as start_run
from tests.ui.helpers import pytorch, write_run

REPO = Path(__file__).resolve().parents[2]
Start = Callable[..., str]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


@pytest.fixture
def start(runs: Path) -> Iterator[Start]:
    """Starts `trainop ui RUNS --port 0 [args]`; returns the address it printed."""
    started: list[subprocess.Popen[str]] = []

    def run(*args: str) -> str:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainop.cli", "ui", str(runs), "--port", "0", *args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert " at http://127.0.0.1:" in line, line
        return line.split(" at ", 1)[1].split()[0]

    yield run
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)


def ask(
    url: str, path: str, method: str = "GET", headers: dict[str, str] | None = None, body: str = ""
) -> http.client.HTTPResponse:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    conn.request(method, path, body=body or None, headers=headers or {})
    return conn.getresponse()


def token_of(url: str) -> str:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["token"][0]


def cookie_of(url: str) -> str:
    answer = ask(url, f"/?token={token_of(url)}")
    assert answer.status == 303
    return answer.headers["Set-Cookie"].split(";", 1)[0]


def test_the_printed_address_carries_a_token(start: Start):
    url = start()
    assert len(token_of(url)) >= 40


def test_a_local_user_without_the_token_cannot_read_a_runs_logs(start: Start, runs: Path):
    write_run(runs, "a", pytorch("a"), merged="secret training output\n")
    answer = ask(start(), "/job/a")
    assert answer.status == 401
    assert b"secret training output" not in answer.read()


def test_the_printed_address_opens_the_runs_logs(start: Start, runs: Path):
    write_run(runs, "a", pytorch("a"), merged="training output\n")
    url = start()
    answer = ask(url, "/job/a", headers={"Cookie": cookie_of(url)})
    assert answer.status == 200 and b"training output" in answer.read()


def test_a_rebound_host_is_refused_even_with_the_token_and_cookie(start: Start, runs: Path):
    write_run(runs, "a", pytorch("a"), merged="training output\n")
    url = start()
    port = urllib.parse.urlsplit(url).port
    headers = {
        "Cookie": cookie_of(url),
        "Host": f"rebound.example:{port}",
        "Origin": f"http://rebound.example:{port}",
    }
    answer = ask(url, f"/job/a?token={token_of(url)}", headers=headers)
    assert answer.status == 421
    assert b"training output" not in answer.read()


def test_a_writable_ui_starts_no_job_for_a_request_without_the_token(
    start: Start, runs: Path, tmp_path: Path
):
    url = start("--writable")
    proof = tmp_path / "pwned"
    form = urllib.parse.urlencode({
        "kind": "PyTorchJob", "name": "pwn", "Worker.replicas": "1", "Worker.image": "python:3.11",
        "Worker.command": f"touch {proof}", "do": "create",
    })  # fmt: skip
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    answer = ask(url, "/new", "POST", headers, form)
    assert answer.status == 401
    assert list(runs.iterdir()) == [] and not proof.exists()


def test_a_merged_log_linked_to_etc_passwd_is_not_served(start: Start, runs: Path):
    workdir = write_run(runs, "a", pytorch("a"))
    (workdir / "merged.log").symlink_to("/etc/passwd")
    url = start()
    answer = ask(url, "/job/a", headers={"Cookie": cookie_of(url)})
    assert answer.status == 200 and b"root:" not in answer.read()


def test_trainop_run_with_ui_prints_a_tokened_address_and_refuses_a_request_without_it(tmp_path: Path):
    job = write_job(tmp_path, "PyTorchJob", Master=replica("PyTorchJob", ["sleep", "600"]))
    proc = start_run(str(job), "--workdir", str(tmp_path / "runs" / "t"), "--ui", "--grace-period", "1")
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "web UI at http://127.0.0.1:" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        assert len(token_of(url)) >= 40
        assert ask(url, "/").status == 401
        assert ask(url, "/", headers={"Cookie": cookie_of(url)}).status == 200
        # As Ctrl-C, as soon as the address is shown: the run is still setting up, and stops anyway.
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "interrupted by SIGINT" in stdout


def test_a_folder_that_does_not_exist_is_served_with_a_warning_saying_so(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-runs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainop.cli", "ui", str(missing), "--port", "0"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert " at http://127.0.0.1:" in proc.stdout.readline()
        warning = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert warning.startswith(f"trainop ui: warning: {missing} is not a folder (yet)")
    assert "trainop run example:pytorch" in warning
