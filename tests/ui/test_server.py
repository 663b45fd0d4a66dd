"""`trainop ui --cluster` as the chart's Deployment runs it: gunicorn with the UI's worker, against a small
fake apiserver. Event streams outlive the answer deadline pages have, and are bounded without taking the
threads pages need."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ui.helpers import pytorch, with_status
from trainop.ui.settings import UiSettings

REPO = Path(__file__).resolve().parents[2]
SECRET = {"TRAINOP_UI_PROXY_SECRET": "from-the-proxy"}
USER = {"X-Trainop-Proxy-Secret": "from-the-proxy", "X-Forwarded-User": "alice"}


class Apiserver(BaseHTTPRequestHandler):
    """Lists one PyTorchJob, holds watches open, and lets everyone list everything."""

    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if "watch" in query:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            time.sleep(60)  # nothing changes; the client's watch ends with the server
            return
        running = with_status(pytorch("mnist", "team-a"), ("Running", "R"))
        items = [running] if "pytorchjobs" in self.path else []
        self._json({"items": items, "metadata": {"resourceVersion": "1"}})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._json({"status": {"allowed": True}})

    def _json(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[str]:
    api = ThreadingHTTPServer(("127.0.0.1", 0), Apiserver)
    api.daemon_threads = True
    threading.Thread(target=api.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{api.server_address[1]}"}}],
        "users": [{"name": "ui", "user": {"token": "fake"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "ui"}}],
    }))  # fmt: skip
    deadlines = {"TRAINOP_UI_RESPONSE_TIMEOUT": "1", "TRAINOP_UI_BODY_TIMEOUT": "1"}
    env = {**os.environ, "TRAINOP_KUBECONFIG": str(kubeconfig), **deadlines, **SECRET}
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainop.cli", "ui", "--cluster", "--auth", "proxy", "--port", "0"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if " at http://" in line:
            break
    else:
        raise AssertionError("".join(seen))
    # The rest of gunicorn's log is not read: drain it, so the server never blocks on a full pipe.
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    url = line.split(" at ", 1)[1].split()[0]
    try:
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        api.shutdown()


def get(url: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=USER)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextlib.contextmanager
def stream(url: str, user: str = "alice") -> Iterator[http.client.HTTPResponse]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", "/stream/list", headers={**USER, "X-Forwarded-User": user})
        yield conn.getresponse()
    finally:
        conn.close()


def test_the_cluster_ui_is_served_by_gunicorn_and_lists_the_watched_jobs(ui: str) -> None:
    for _ in range(100):  # the worker's first list of the cluster may still be on its way
        status, page = get(ui)
        if "mnist" in page:
            break
        time.sleep(0.1)
    assert status == 200 and "mnist" in page


def test_an_event_stream_goes_on_past_the_answer_deadline_of_a_page(ui: str) -> None:
    with stream(ui) as answer:
        assert answer.status == 200
        start = time.monotonic()
        while time.monotonic() - start < 3:  # past the body and answer deadlines (1 s each) together
            line = answer.readline()
            assert line, "the stream was cut"
        assert answer.readline()


def test_streams_past_the_bound_get_503_while_pages_are_still_served(ui: str) -> None:
    quota = UiSettings.max_user_streams
    users = [f"user-{i // quota}" for i in range(UiSettings.max_streams)]  # each within their quota
    with contextlib.ExitStack() as held:
        answers = [held.enter_context(stream(ui, user)) for user in users]
        assert [a.status for a in answers] == [200] * UiSettings.max_streams
        with stream(ui, "someone-else") as refused:
            assert refused.status == 503
            assert refused.getheader("Retry-After") == "5"
        assert get(ui)[0] == 200


def test_the_ui_refuses_to_start_in_proxy_mode_without_the_proxys_secret() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRAINOP_UI_PROXY_SECRET"}
    done = subprocess.run(
        [sys.executable, "-m", "trainop.cli", "ui", "--cluster", "--auth", "proxy", "--host", "0.0.0.0"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--auth proxy needs the secret the proxy sends in X-Trainop-Proxy-Secret" in done.stderr
    assert "set TRAINOP_UI_PROXY_SECRET" in done.stderr
