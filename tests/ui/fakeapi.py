"""A small fake apiserver (a flask app) for the cluster UI's tests and bench: jobs of team-a, the mnist
job's pods, Events served with field selectors and pages, logs read once or followed, and what it was
asked (requests, writes, open follows)."""

from __future__ import annotations

import contextlib
import itertools
import json
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

from flask import Flask, Response, request
from werkzeug.serving import make_server

from tests.ui.helpers import pod, pytorch, with_status
from trainop.extensions.tensorboard import ANNOTATION as TENSORBOARD
from trainop.jsontypes import Json
from trainop.kubeclient import KubeClient


def with_tensorboard(obj: Json) -> Json:
    obj["metadata"].setdefault("annotations", {})[TENSORBOARD] = "s3://bucket/runs"
    return obj


class FakeApi:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.listable = {"team-a"}  # namespaces anyone may list jobs in
        self.config_maps: set[str] = set()  # names of the ConfigMaps there are
        self.writes: list[str] = []  # method and path with its query, of every request but a GET
        self.served: set[str] = set()  # group/versions the cluster serves beyond the built-in ones
        self.forbidden: set[str] = set()  # resources (plural) nobody may read
        self.writers: set[str] = set()  # users who may create, patch and delete jobs
        self.denied: set[tuple[str, str]] = set()  # (user, resource plural) access reviews answer no to
        self.refusal = ""  # the message a create of a job is refused with (422), if any
        self.events: list[Json] = []  # the namespace's Events
        self.workers = 2  # how many worker pods the mnist job has
        self.lock = threading.Lock()
        self.follows_open = 0  # followed logs whose answer is still being sent
        self.follows_opened = 0
        self.event_items = 0  # Events sent in all answers
        self.app = Flask(__name__)
        self.app.add_url_rule("/<path:path>", "any", self.answer, methods=["GET", "POST", "PATCH", "DELETE"])

    def answer(self, path: str) -> Any:
        query = request.query_string.decode()
        with self.lock:
            self.seen.append(
                (request.method, "/" + path + (f"?{query}" if query else ""), dict(request.headers))
            )
        if request.method != "GET":
            self.writes.append(f"{request.method} /{path}" + (f"?{query}" if query else ""))
        if path == "apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
            attributes = request.get_json()["spec"]["resourceAttributes"]
            if (request.headers.get("Impersonate-User", ""), attributes["resource"]) in self.denied:
                return {"status": {"allowed": False}}
            if attributes["verb"] in ("patch", "delete", "create"):
                return {"status": {"allowed": request.headers.get("Impersonate-User") in self.writers}}
            return {"status": {"allowed": attributes.get("namespace", "") in self.listable}}
        if path.endswith("/configmaps") and request.method == "POST":
            name = request.get_json()["metadata"]["name"]
            if name in self.config_maps:
                return Response(json.dumps({"message": "already exists"}), 409)
            return Response(json.dumps(request.get_json()), 201)
        if "/configmaps/" in path and request.method == "PATCH":
            return {}
        if path.endswith("pytorchjobs") and request.method == "POST" and self.refusal:
            return Response(json.dumps({"kind": "Status", "code": 422, "message": self.refusal}), 422)
        if path.endswith("pytorchjobs") and request.method == "POST":
            return Response(json.dumps(request.get_json()), 201)
        if path.endswith("pytorchjobs/secret"):
            return Response(json.dumps({"message": "forbidden"}), 403)
        if path.startswith("apis/") and path.count("/") == 2:
            return {} if path.removeprefix("apis/") in self.served else Response("{}", 404)
        if "/podgroups/" in path or path.endswith("/workloads"):
            return self.scheduling(path)
        if path.endswith("pytorchjobs/queued"):
            queued = with_status(pytorch("queued", "team-a"), ("Suspended", "JobSuspended"))
            queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a-queue"}
            return queued
        if path.endswith("pytorchjobs/board"):
            return with_status(with_tensorboard(pytorch("board", "team-a")), ("Running", "R"))
        if path.endswith("pytorchjobs/mnist"):
            return with_status(pytorch("mnist", "team-a"), ("Running", "R"))
        if path.endswith("/pods"):
            owned = [pod(f"mnist-worker-{i}") for i in range(self.workers)]
            for p in owned:
                p["metadata"]["ownerReferences"] = [{"uid": "uid-mnist"}]
                p["spec"]["containers"] = [{"name": "pytorch"}]
            stranger = pod("other-worker-0")
            stranger["metadata"]["ownerReferences"] = [{"uid": "uid-other"}]
            return {"items": [*owned, stranger]}
        if path.endswith("/events"):
            return self.list_events()
        if path.endswith("/log") and request.args.get("follow") == "true":
            return Response(self.follow(path.split("/")[-2]), mimetype="text/plain")
        if path.endswith("/log"):
            name = path.split("/")[-2]
            return Response(f"{name} line 1\n{name} line 2\n", mimetype="text/plain")
        return Response("{}", 404)

    def list_events(self) -> Json:
        """As the apiserver pages a list: the events the field selector matches, `limit` at a time."""
        wanted = [
            tuple(term.split("=", 1)) for term in request.args.get("fieldSelector", "").split(",") if term
        ]
        matching = [
            e
            for e in self.events
            if all(str((e.get("involvedObject") or {}).get(k.split(".", 1)[1])) == v for k, v in wanted)
        ]
        start = int(request.args.get("continue") or 0)
        limit = int(request.args.get("limit") or 0) or len(matching)
        items = matching[start : start + limit]
        with self.lock:
            self.event_items += len(items)
        more = start + limit < len(matching)
        return {"items": items, "metadata": {"continue": str(start + limit) if more else ""}}

    def follow(self, name: str) -> Iterator[bytes]:
        """A followed log: two lines, then one every 50 ms for as long as the client reads."""
        with self.lock:
            self.follows_open += 1
            self.follows_opened += 1
        try:
            yield f"{name} line 1\n{name} line 2\n".encode()
            for i in itertools.count(3):
                time.sleep(0.05)
                yield f"{name} line {i}\n".encode()
        finally:
            with self.lock:
                self.follows_open -= 1

    def scheduling(self, path: str) -> Any:
        api = "/".join(path.split("/")[1:3])
        if api not in self.served:
            return Response("{}", 404)
        if path.split("/")[-1 if path.endswith("workloads") else -2] in self.forbidden:
            return Response(json.dumps({"message": "forbidden"}), 403)
        if path.endswith("/workloads"):
            return {"items": [workload("uid-queued"), workload("uid-other")]}
        name = path.split("/")[-1]
        return {
            "metadata": {"name": name},
            "spec": {"minMember": 3},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                     "message": "3/3 tasks in gang unschedulable"},
                ],
            },
        }  # fmt: skip


def workload(owner: str) -> Json:
    return {
        "metadata": {"name": f"pytorchjob-{owner}", "ownerReferences": [{"uid": owner}]},
        "spec": {"queueName": "team-a-queue"},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                 "message": "couldn't assign flavors to pod set worker: insufficient quota for cpu"},
            ],
        },
    }  # fmt: skip


@contextlib.contextmanager
def serving(fake: FakeApi) -> Iterator[KubeClient]:
    """`fake` on a loopback port, threaded as an apiserver is, and a client of it."""
    server = make_server("127.0.0.1", 0, fake.app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield KubeClient(
            server=f"http://127.0.0.1:{server.server_port}", context=ssl.create_default_context()
        )
    finally:
        server.shutdown()


def event(name: str, reason: str, kind: str = "Pod", uid: str = "", when: int = 0) -> Json:
    """A core Event about `kind`/`name` in team-a, `when` seconds after ten o'clock."""
    involved = {"kind": kind, "name": name, "namespace": "team-a", **({"uid": uid} if uid else {})}
    return {
        "involvedObject": involved,
        "reason": reason, "type": "Normal", "message": f"{reason} of {name}",
        "lastTimestamp": f"2026-12-01T10:{when // 60:02d}:{when % 60:02d}Z",
    }  # fmt: skip
