"""A cluster as a Source: a watched summary of every kind for the list, and every call for a user made
as that user (impersonation, or their own token), so the cluster's RBAC decides what each one sees.

The summary is kept with the UI's own credentials (one list+watch per kind, re-listed when a watch ends);
a user's list shows only the namespaces in which a SelfSubjectAccessReview, made as that user, says they
may list that kind. A job's page, its pods, Events and logs, and every write are requests as the user.
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import threading
import time
import urllib.error
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import replace

from trainop.frameworks import KINDS, kind_info
from trainop.jsontypes import Json
from trainop.kubeclient import ApiError, KubeClient, connect
from trainop.local.logs import prefix
from trainop.ui.app import UiSettings
from trainop.ui.auth import SYSTEM, Authenticator, token_key
from trainop.ui.bounded import Expiring
from trainop.ui.runs import check
from trainop.ui.scheduling import Discovery, Gate, gates, waiting
from trainop.ui.source import Container, Detail, EventRow, Invalid, NotAllowed, User
from trainop.ui.summary import Summary, summarize

GROUP = "kubeflow.org/v1"
JOB_LABEL = "training.kubeflow.org/job-name"
# How long a user's "may list X in namespace N" answer is reused, and how many such answers are kept.
ACCESS_SECONDS = 30.0
MAX_ACCESS_ANSWERS = 10_000
WATCH_SECONDS = 300
LOG_POLL_SECONDS = 2.0
MAX_MERGED_QUEUE = 10_000


def _key(job: Json) -> str:
    meta = job.get("metadata") or {}
    return f"{meta.get('namespace')}/{job.get('kind')}/{meta.get('name')}"


class Cluster:
    actions: tuple[str, ...] = ("suspend", "resume", "delete")
    creates = "created"
    # The sync hook serves every extension's children (a TensorBoard for a job with its annotation).
    serves_addons = True

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.jobs: dict[str, dict[str, Summary]] = {kind: {} for kind in KINDS}
        self.lock = threading.Lock()
        self.access: Expiring[tuple[str, tuple[str, ...], str, str, str, str], bool] = Expiring(
            MAX_ACCESS_ANSWERS
        )
        self.access_lock = threading.Lock()
        self.discovery = Discovery(lambda path: self.client.request("GET", path))

    # ---- the watched summary ------------------------------------------------------------------------
    def start(self) -> None:
        for kind in KINDS:
            threading.Thread(target=self._watch, args=(kind,), name=f"watch-{kind}", daemon=True).start()

    def _watch(self, kind: str) -> None:
        plural = kind_info(kind).plural
        while True:
            try:
                listed = self.client.request("GET", f"/apis/{GROUP}/{plural}")
                items = {_key(j): summarize(j, _key(j), None) for j in listed.get("items") or []}
                with self.lock:
                    self.jobs[kind] = items
                version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                self._follow(kind, plural, version)
            except (ApiError, OSError, ValueError):
                time.sleep(5)

    def _follow(self, kind: str, plural: str, version: str) -> None:
        query = urllib.parse.urlencode(
            {"watch": "1", "resourceVersion": version, "timeoutSeconds": WATCH_SECONDS}
        )
        with self.client.open("GET", f"/apis/{GROUP}/{plural}?{query}", timeout=WATCH_SECONDS + 30) as stream:
            for line in stream:
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return  # too old a resourceVersion: list again
                key = _key(obj)
                with self.lock:
                    if event.get("type") == "DELETED":
                        self.jobs[kind].pop(key, None)
                    elif event.get("type") in ("ADDED", "MODIFIED"):
                        self.jobs[kind][key] = summarize(obj, key, None)

    # ---- as the user --------------------------------------------------------------------------------
    def as_user(self, user: User) -> KubeClient:
        if user.token:
            return replace(self.client, token=user.token, token_file=None, headers=())
        if not user.name:
            return self.client
        # The authenticator refuses these already; here too, as the one place the headers are built.
        system = [n for n in (user.name, *user.groups) if n.startswith(SYSTEM)]
        if system:
            raise NotAllowed(f"the UI never acts as {system[0]!r} ({SYSTEM} names are the cluster's own)")
        headers = [("Impersonate-User", user.name)]
        headers += [("Impersonate-Group", g) for g in user.groups]
        return replace(self.client, headers=tuple(headers))

    def may_list(self, user: User, kind: str, namespace: str) -> bool:
        """Whether the user may list `kind` in `namespace` ("" for every namespace), asked as the user."""
        return self._may(user, "list", kind, namespace)

    def may(self, user: User, key: str, action: str) -> bool:
        """Whether the user may create (the wizard; `key` then names the job to be), patch (suspend,
        resume) or delete the job, asked as the user."""
        try:
            ns, kind, name = self._parse(key)
        except Invalid:
            return False
        if action == "create":
            return self._may(user, "create", kind, ns)
        verb = "delete" if action == "delete" else "patch"
        return self._may(user, verb, kind, ns, name)

    def _may(self, user: User, verb: str, kind: str, namespace: str, name: str = "") -> bool:
        """A SelfSubjectAccessReview made as the user, its answer reused for ACCESS_SECONDS."""
        cache = (user.name or token_key(user.token), user.groups, verb, kind, namespace, name)
        with self.access_lock:
            hit, known = self.access.get(cache, time.monotonic())
        if hit:
            return bool(known)
        attributes = {"verb": verb, "group": "kubeflow.org", "resource": kind_info(kind).plural}
        if namespace:
            attributes["namespace"] = namespace
        if name:
            attributes["name"] = name
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        try:
            answer = self.as_user(user).request(
                "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review
            )
            allowed = bool((answer.get("status") or {}).get("allowed"))
        except (ApiError, NotAllowed):
            allowed = False
        with self.access_lock:
            self.access.put(cache, allowed, ACCESS_SECONDS, time.monotonic())
        return allowed

    def summaries(self, user: User) -> list[Summary]:
        with self.lock:
            snapshot = {kind: list(jobs.values()) for kind, jobs in self.jobs.items()}
        out: list[Summary] = []
        for kind, jobs in snapshot.items():
            if not jobs:
                continue
            if self.may_list(user, kind, ""):
                out += jobs
                continue
            allowed = {ns for ns in {s.namespace for s in jobs} if self.may_list(user, kind, ns)}
            out += [s for s in jobs if s.namespace in allowed]
        return out

    def _parse(self, key: str) -> tuple[str, str, str]:
        parts = key.split("/")
        if len(parts) != 3 or parts[1] not in KINDS:
            raise Invalid([("", f"not a job key (namespace/kind/name): {key!r}")])
        return parts[0], parts[1], parts[2]

    def _call(
        self, user: User, method: str, path: str, body: Json | None = None, ctype: str | None = None
    ) -> Json:
        try:
            return self.as_user(user).request(method, path, body, ctype)
        except ApiError as exc:
            if exc.status in (401, 403):
                raise NotAllowed(str(exc)) from None
            raise

    def detail(self, user: User, key: str) -> Detail | None:
        try:
            ns, kind, name = self._parse(key)
        except Invalid:
            return None
        plural = kind_info(kind).plural
        try:
            job = self._call(user, "GET", f"/apis/{GROUP}/namespaces/{ns}/{plural}/{name}")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        selector = urllib.parse.urlencode({"labelSelector": f"{JOB_LABEL}={name}"})
        notes: list[str] = []
        try:
            pods = self._call(user, "GET", f"/api/v1/namespaces/{ns}/pods?{selector}").get("items") or []
        except NotAllowed:
            pods, notes = [], ["you may not list pods in this namespace"]
        # Only this job's pods: the selector names the job, and the owner must be this very job.
        uid = (job.get("metadata") or {}).get("uid")
        pods = [
            p
            for p in pods
            if any(o.get("uid") == uid for o in (p.get("metadata") or {}).get("ownerReferences") or [])
        ]
        names = {name, *((p.get("metadata") or {}).get("name") for p in pods)}
        try:
            raw = self._call(user, "GET", f"/api/v1/namespaces/{ns}/events").get("items") or []
        except NotAllowed:
            raw, notes = [], [*notes, "you may not list events in this namespace"]
        events = sorted(
            (_event(e) for e in raw if (e.get("involvedObject") or {}).get("name") in names),
            key=lambda e: e.time,
        )
        containers = [
            Container(str(p["metadata"]["name"]), str(c.get("name")))
            for p in sorted(pods, key=lambda p: str(p["metadata"]["name"]))
            for c in (p.get("spec") or {}).get("containers") or []
        ]
        summary = summarize(job, key, pods)
        live = summary.state not in ("Succeeded", "Failed")
        scheduling: list[Gate] = []
        if waiting(pods, not live):
            client = self.as_user(user)
            scheduling, more = gates(lambda path: client.request("GET", path), self.discovery, job, pods)
            notes += more
        return Detail(summary, job, pods, events, containers, live, notes, scheduling)

    def follow_logs(
        self, user: User, key: str, container: Container | None, tail: int
    ) -> Iterator[list[str]]:
        detail = self.detail(user, key)
        if detail is None:
            return
        ns, kind, name = self._parse(key)
        default = kind_info(kind).default_container
        chosen = [container] if container else detail.containers
        lines: queue.Queue[str | None] = queue.Queue(MAX_MERGED_QUEUE)
        client = self.as_user(user)
        for c in chosen:
            tag = "" if container else prefix(name, c.pod, c.name, default) + " "
            threading.Thread(target=_pump, args=(client, ns, c, tail, tag, lines), daemon=True).start()
        running = len(chosen)
        first: list[str] = []
        deadline = time.monotonic() + 1.0
        while running and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                running -= 1
            else:
                first.append(line)
        yield first[-tail:]
        while running:
            batch: list[str] = []
            try:
                line = lines.get(timeout=LOG_POLL_SECONDS)
                while True:
                    if line is None:
                        running -= 1
                    else:
                        batch.append(line)
                    line = lines.get_nowait()
            except queue.Empty:
                pass
            yield batch

    def act(self, user: User, key: str, action: str) -> str:
        ns, kind, name = self._parse(key)
        path = f"/apis/{GROUP}/namespaces/{ns}/{kind_info(kind).plural}/{name}"
        if action in ("suspend", "resume"):
            patch = {"spec": {"runPolicy": {"suspend": action == "suspend"}}}
            self._call(user, "PATCH", path, patch, "application/merge-patch+json")
            return f"{kind} {name}: {'suspended' if action == 'suspend' else 'resumed'}"
        if action == "delete":
            self._call(user, "DELETE", path)
            return f"{kind} {name}: deleted"
        raise NotAllowed(f"unknown action {action}")

    def create(self, user: User, job: Json, dry_run: bool, companions: Sequence[Json] = ()) -> str:
        errors = check(job)
        if errors:
            raise Invalid(errors)
        ns = str(job["metadata"].get("namespace") or "default")
        path = f"/apis/{GROUP}/namespaces/{ns}/{kind_info(str(job['kind'])).plural}"
        # With ConfigMaps to apply first, the job is judged (dry run) before anything is written, so a
        # refused job leaves no ConfigMap behind.
        if companions and not dry_run:
            self._post(user, f"{path}?dryRun=All", job)
        for config_map in companions:
            self._apply_config_map(user, ns, config_map, dry_run)
        self._post(user, f"{path}?dryRun=All" if dry_run else path, job)
        if dry_run:
            return "the cluster accepts it (dry run)"
        made = ", ".join(f"ConfigMap {(c.get('metadata') or {}).get('name')}" for c in companions)
        return f"created (with {made})" if made else "created"

    def _post(self, user: User, path: str, body: Json) -> Json:
        try:
            return self.as_user(user).request("POST", path, body)
        except ApiError as exc:
            if exc.status in (401, 403):
                raise NotAllowed(str(exc)) from None
            raise Invalid(field_errors(exc.message)) from None

    def _apply_config_map(self, user: User, ns: str, config_map: Json, dry_run: bool) -> None:
        """Create it, or, when one of that name is there (an earlier job of the same example), write its
        data over it, as `kubectl apply` of the downloaded file would."""
        if config_map.get("kind") != "ConfigMap" or config_map.get("apiVersion") != "v1":
            raise Invalid([("", "only ConfigMaps are applied with a job")])
        name = str((config_map.get("metadata") or {}).get("name") or "")
        query = "?dryRun=All" if dry_run else ""
        path = f"/api/v1/namespaces/{ns}/configmaps"
        try:
            self.as_user(user).request("POST", path + query, config_map)
            return
        except ApiError as exc:
            if exc.status in (401, 403):
                raise NotAllowed(str(exc)) from None
            if exc.status != 409:
                raise Invalid([("", f"ConfigMap {name}: {exc}")]) from None
        patch = {"data": config_map.get("data") or {}}
        try:
            self.as_user(user).request(
                "PATCH", f"{path}/{name}{query}", patch, "application/merge-patch+json"
            )
        except ApiError as exc:
            if exc.status in (401, 403):
                raise NotAllowed(str(exc)) from None
            raise Invalid([("", f"ConfigMap {name}: {exc}")]) from None


# What the apiserver puts before the field errors of a refused object: a webhook's denial (our webhook
# sends the bare `path: detail; path: detail` list) or its own validation (`path: detail, path: detail`,
# in brackets when there are several).
_REFUSED = re.compile(r"(?:denied the request|is invalid): (.*)$", re.DOTALL)
_FIELD_ERROR = re.compile(r"^((?:metadata|spec)(?:\.[\w/-]+|\[[^\]]*\])+): (.+)$", re.DOTALL)


def field_errors(message: str) -> list[tuple[str, str]]:
    """The (field path, message) pairs of a refusal, so each is shown at its field; the whole message, at
    no field, when it names none."""
    match = _REFUSED.search(message)
    if not match:
        return [("", message)]
    body = match.group(1).strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    parts = re.split(r"; |, (?=(?:metadata|spec)[.\[])", body)
    found = [m.groups() for m in map(_FIELD_ERROR.match, parts) if m]
    if len(found) != len(parts):
        return [("", message)]
    return [(path, detail) for path, detail in found]


def _event(e: Json) -> EventRow:
    """A core Event, or one written through events.k8s.io (as kube-scheduler does): that kind keeps its
    repeats in `series` and its time in microseconds, shown to the second like the others."""
    involved = e.get("involvedObject") or {}
    series = e.get("series") or {}
    when = str(
        e.get("lastTimestamp")
        or series.get("lastObservedTime")
        or e.get("eventTime")
        or (e.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
    return EventRow(
        time=re.sub(r"\.\d+(?=Z$)", "", when),
        type=str(e.get("type") or ""),
        reason=str(e.get("reason") or ""),
        message=str(e.get("message") or ""),
        object=f"{involved.get('kind')}/{involved.get('name')}",
        count=int(e.get("count") or series.get("count") or 1),
    )


def _pump(
    client: KubeClient, ns: str, c: Container, tail: int, tag: str, out: queue.Queue[str | None]
) -> None:
    query = urllib.parse.urlencode({"container": c.name, "tailLines": tail, "follow": "true"})
    try:
        with client.open("GET", f"/api/v1/namespaces/{ns}/pods/{c.pod}/log?{query}", timeout=3600) as stream:
            for raw in stream:
                line = tag + raw.decode("utf-8", "replace").rstrip("\n")
                try:
                    out.put(line, timeout=5)
                except queue.Full:
                    return  # nobody reads any more
    except (TimeoutError, urllib.error.URLError, OSError):
        pass
    finally:
        with contextlib.suppress(queue.Full):
            out.put(None, timeout=5)


def cluster_source(settings: UiSettings) -> tuple[Cluster, Authenticator | None]:
    client = connect(settings.kubeconfig)
    source = Cluster(client)
    source.start()
    review = None
    if settings.auth.mode == "token":

        def review(token: str) -> User | None:
            body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
            status = (
                client.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body).get("status")
                or {}
            )
            if not status.get("authenticated"):
                return None
            user = status.get("user") or {}
            return User(str(user.get("username") or ""), tuple(user.get("groups") or ()), token)

    return source, Authenticator(settings.auth, review)
