"""A fake kube-apiserver over HTTP for the hook server under gunicorn: the jobs it holds, and the Events
the hooks write (POST, and PATCH as hooks.kubeapi reads and bumps them), counting every request.

`FakeApiserver(jobs)` holds a fixed set of jobs, or answers with `jobs(namespace, name)` for any job it is
asked about (to stand in for a cluster of thousands). `kubeconfig` is the file to hand the server as
TRAINOP_KUBECONFIG.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from trainop.frameworks import kind_info
from trainop.jsontypes import Json

JOB_PATH = re.compile(r"/apis/kubeflow\.org/v1/namespaces/([^/]+)/([^/]+)/([^/]+)")
EVENTS_PATH = re.compile(r"/api/v1/namespaces/([^/]+)/events(?:/([^/]+))?")


class FakeApiserver:
    def __init__(self, tmp_path: Path, jobs: Iterable[Json] | Callable[[str, str], Json | None] = ()) -> None:
        self.lookup = jobs if callable(jobs) else self._fixed(list(jobs))
        self.events: dict[tuple[str, str], Json] = {}
        self.requests: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.http.daemon_threads = True
        self.kubeconfig = tmp_path / "kubeconfig"
        server = f"http://127.0.0.1:{self.http.server_address[1]}"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": server}}],
            "users": [{"name": "hooks", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "hooks"}}],
            "current-context": "fake",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))

    @staticmethod
    def _fixed(jobs: list[Json]) -> Callable[[str, str], Json | None]:
        def lookup(namespace: str, name: str) -> Json | None:
            for job in jobs:
                if (job["metadata"]["namespace"], job["metadata"]["name"]) == (namespace, name):
                    return job
            return None

        return lookup

    def job_events(self, name: str) -> list[Json]:
        with self.lock:
            return [e for e in self.events.values() if e["involvedObject"]["name"] == name]

    def settle(self, job_reads: int, timeout: float = 180) -> None:
        """Wait until the hooks have read `job_reads` jobs and then made no request for a second: every
        recorder has then written all it was going to."""
        deadline = time.monotonic() + timeout
        last, quiet_since = -1, time.monotonic()
        while True:
            with self.lock:
                reads, total = self.requests["get-job"], sum(self.requests.values())
            if total != last:
                last, quiet_since = total, time.monotonic()
            if reads >= job_reads and time.monotonic() - quiet_since > 1.0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the hooks read {reads} of {job_reads} jobs")
            time.sleep(0.1)

    def _answer(self, method: str, path: str, body: Any) -> tuple[int, Json]:
        job = JOB_PATH.fullmatch(path)
        if job and method == "GET":
            namespace, plural, name = job.groups()
            self.requests["get-job"] += 1
            found = self.lookup(namespace, name)
            if found is None or kind_info(found["kind"]).plural != plural:
                return 404, {"kind": "Status", "code": 404, "message": "not found"}
            return 200, copy.deepcopy(found)
        events = EVENTS_PATH.fullmatch(path)
        if events and method == "POST":
            self.requests["create-event"] += 1
            key = (events.group(1), body["metadata"]["name"])
            if key in self.events:
                return 409, {"kind": "Status", "code": 409, "message": "already exists"}
            self.events[key] = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
            return 201, self.events[key]
        if events and events.group(2) and method == "PATCH":
            self.requests["patch-event"] += 1
            stored = self.events.get((events.group(1), events.group(2)))
            if stored is None:
                return 404, {"kind": "Status", "code": 404, "message": "not found"}
            if body:
                meta = body.get("metadata") or {}
                if meta.get("resourceVersion") != stored["metadata"]["resourceVersion"]:
                    return 409, {"kind": "Status", "code": 409, "message": "conflict"}
                stored["metadata"]["annotations"].update(meta.get("annotations") or {})
                stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
                stored.update({k: v for k, v in body.items() if k != "metadata"})
            return 200, stored
        return 404, {"kind": "Status", "code": 404, "message": f"no fake route {method} {path}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake.lock:
                    status, answer = fake._answer(self.command, self.path.split("?")[0], body)
                    data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextlib.contextmanager
def fake_apiserver(
    tmp_path: Path, jobs: Iterable[Json] | Callable[[str, str], Json | None] = ()
) -> Iterator[FakeApiserver]:
    fake = FakeApiserver(tmp_path, jobs)
    thread = threading.Thread(target=fake.http.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.http.shutdown()
        fake.http.server_close()
