"""A cluster as a Source: a watched summary of every kind for the list, and every call for a user made
as that user (impersonation, or their own token), so the cluster's RBAC decides what each one sees.

The summary is kept with the UI's own credentials (one list+watch per kind, re-listed when a watch ends);
a user's list shows only the namespaces in which a SelfSubjectAccessReview, made as that user, says they
may list that kind. A job's page, its pods, Events and logs, and every write are requests as the user.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import Any

from trainop.frameworks import KINDS, kind_info
from trainop.jsontypes import Json
from trainop.kubeclient import ApiError, KubeClient, connect
from trainop.local.logs import prefix
from trainop.ui.auth import SYSTEM, Authenticator, AuthSettings, token_key
from trainop.ui.bounded import Expiring
from trainop.ui.paths import (
    GROUP,
    JobRef,
    check_subdomain,
    config_map_path,
    config_maps_path,
    events_path,
    job_path,
    jobs_path,
    log_path,
    parse_key,
    pods_path,
)
from trainop.ui.polls import Polls
from trainop.ui.runs import check
from trainop.ui.scheduling import POD_GROUP_APIS, WORKLOAD_API, Discovery, Gate, gates, waiting
from trainop.ui.source import BadKey, Container, Detail, EventRow, Invalid, NotAllowed, User
from trainop.ui.summary import Summary, summarize

JOB_LABEL = "training.kubeflow.org/job-name"
# How long a user's "may list X in namespace N" answer is reused, and how many such answers are kept.
ACCESS_SECONDS = 30.0
MAX_ACCESS_ANSWERS = 10_000
WATCH_SECONDS = 300
LOG_POLL_SECONDS = 2.0
MAX_MERGED_QUEUE = 10_000
# A merged log reads (or follows) this many containers at most, so a page of a 200-pod job costs the
# apiserver (and the kubelets) 8 log reads, not 200; the page says so and offers each container's own.
MAX_LOG_CONTAINERS = 8
# What one log read may return, and one line of a followed log.
LOG_BYTES = 256 * 1024
LINE_BYTES = 16 * 1024
# A job's Events are asked for by object (field selectors), a page at a time: the job's own and those
# of at most EVENT_PODS of its pods (the ones not running first), each at most EVENTS_PER_OBJECT, so a
# namespace holding 20,000 Events costs what the job's own cost.
EVENTS_PAGE = 100
EVENTS_PER_OBJECT = 500
EVENT_PODS = 10


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
        # The job pages' streams: one poll per job and access (see `details`).
        self.polls: Polls[Detail | None] = Polls()
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
            job = parse_key(key)
        except BadKey:
            return False
        if action == "create":
            return self._may(user, "create", job.kind, job.namespace)
        verb = "delete" if action == "delete" else "patch"
        return self._may(user, verb, job.kind, job.namespace, job.name)

    def _may(self, user: User, verb: str, kind: str, namespace: str, name: str = "") -> bool:
        return self._allowed(user, verb, "kubeflow.org", kind_info(kind).plural, namespace, name)

    def _allowed(
        self, user: User, verb: str, group: str, resource: str, namespace: str, name: str = ""
    ) -> bool:
        """A SelfSubjectAccessReview made as the user, its answer reused for ACCESS_SECONDS."""
        who = user.name or token_key(user.token)
        cache = (who, user.groups, verb, f"{resource}.{group}", namespace, name)
        with self.access_lock:
            hit, known = self.access.get(cache, time.monotonic())
        if hit:
            return bool(known)
        attributes = {"verb": verb, "group": group, "resource": resource}
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
        """The job's page as the user reads it; None when there is no such job; BadKey when `key` names
        none."""
        ref = parse_key(key)
        try:
            job = self._call(user, "GET", job_path(ref))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        notes: list[str] = []
        try:
            pods = (
                self._call(
                    user, "GET", pods_path(ref.namespace, {"labelSelector": f"{JOB_LABEL}={ref.name}"})
                ).get("items")
                or []
            )
        except NotAllowed:
            pods, notes = [], ["you may not list pods in this namespace"]
        # Only this job's pods: the selector names the job, and the owner must be this very job.
        uid = str((job.get("metadata") or {}).get("uid") or "")
        pods = [
            p
            for p in pods
            if any(o.get("uid") == uid for o in (p.get("metadata") or {}).get("ownerReferences") or [])
        ]
        try:
            events, more = self._events(user, ref, uid, pods)
            notes += more
        except NotAllowed:
            events, notes = [], [*notes, "you may not list events in this namespace"]
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

    def _events(
        self, user: User, ref: JobRef, uid: str, pods: list[Json]
    ) -> tuple[list[EventRow], list[str]]:
        """The Events about the job and its pods, asked for by object (never the namespace's whole list),
        with notes on what was left out."""
        # The pods that are not running first: their Events (FailedScheduling, BackOff) say why.
        ranked = sorted(
            pods,
            key=lambda p: ((p.get("status") or {}).get("phase") in ("Running", "Succeeded"),
                           str((p.get("metadata") or {}).get("name"))),
        )  # fmt: skip
        objects = [(ref.name, uid)] + [
            (str(p["metadata"].get("name")), str(p["metadata"].get("uid") or "")) for p in ranked[:EVENT_PODS]
        ]
        notes = []
        if len(pods) > EVENT_PODS:
            notes.append(
                f"Events of {EVENT_PODS} of its {len(pods)} pods are shown (those not running first)"
            )
        rows: list[EventRow] = []
        for name, object_uid in objects:
            found, complete = self._events_of(user, ref.namespace, name, object_uid)
            rows += found
            if not complete:
                notes.append(f"only the first {EVENTS_PER_OBJECT} Events of {name} are shown")
        return sorted(rows, key=lambda e: e.time), notes

    def _events_of(self, user: User, namespace: str, name: str, uid: str) -> tuple[list[EventRow], bool]:
        """One object's Events, page by page; whether that was all of them."""
        selector = f"involvedObject.namespace={namespace},involvedObject.name={check_subdomain('name', name)}"
        if uid:
            selector += f",involvedObject.uid={uid}"
        rows: list[EventRow] = []
        token = ""
        while len(rows) < EVENTS_PER_OBJECT:
            query: dict[str, str | int] = {"fieldSelector": selector, "limit": EVENTS_PAGE}
            if token:
                query["continue"] = token
            page = self._call(user, "GET", events_path(namespace, query))
            rows += [_event(e) for e in (page.get("items") or [])[:EVENTS_PAGE]]
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                return rows[:EVENTS_PER_OBJECT], len(rows) <= EVENTS_PER_OBJECT
        return rows[:EVENTS_PER_OBJECT], False

    def details(self, user: User, key: str, poll: float) -> Generator[Detail | None]:
        """A job page's stream: one poller per job shared by every stream of users with the same access
        to what the page reads (the same answers to "may list pods", "may list events", "may get the
        PodGroups" of each scheduling API and "may list Kueue Workloads" there), reading as one of them,
        so no stream shows what its own user may not read. Each stream's user is asked again, at most
        every ACCESS_SECONDS, whether they may still get the job."""
        ref = parse_key(key)
        access = (
            self._allowed(user, "list", "", "pods", ref.namespace),
            self._allowed(user, "list", "", "events", ref.namespace),
            *(
                self._allowed(user, "get", api.split("/")[0], "podgroups", ref.namespace, ref.name)
                for api in POD_GROUP_APIS
            ),
            self._allowed(user, "list", WORKLOAD_API.split("/")[0], "workloads", ref.namespace),
        )
        with self.polls.subscribe((key, access), lambda: self.detail(user, key), poll) as subscription:
            version, last = 0, None
            while self._may(user, "get", ref.kind, ref.namespace, ref.name):
                try:
                    got = subscription.next(version, timeout=max(5.0, 5 * poll))
                except NotAllowed:
                    break
                except (ApiError, OSError):
                    got = None  # the apiserver hiccupped: the page keeps what it shows
                if got is not None:
                    version, last = got
                    if last is None:
                        break
                if last is not None:
                    yield last
        yield None

    def _log_containers(
        self, detail: Detail, container: Container | None
    ) -> tuple[list[Container], list[str]]:
        if container:
            return [container], []
        chosen = detail.containers[:MAX_LOG_CONTAINERS]
        if len(detail.containers) <= MAX_LOG_CONTAINERS:
            return chosen, []
        return chosen, [
            f"(trainop ui: the logs of the first {MAX_LOG_CONTAINERS} of {len(detail.containers)} "
            "containers; choose a container for its own)"
        ]

    def read_logs(
        self, user: User, key: str, detail: Detail, container: Container | None, tail: int
    ) -> list[str]:
        ref = parse_key(key)
        chosen, note = self._log_containers(detail, container)
        default = kind_info(ref.kind).default_container
        client = self.as_user(user)
        lines: list[str] = []
        for c in chosen:
            tag = "" if container else prefix(ref.name, c.pod, c.name, default) + " "
            path = log_path(ref.namespace, c.pod, c.name, {"tailLines": tail, "limitBytes": LOG_BYTES})
            try:
                with client.open("GET", path) as answer:
                    text = answer.read(LOG_BYTES).decode("utf-8", "replace")
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                lines.append(f"{tag}(trainop ui: its log could not be read: {exc})")
                continue
            lines += [tag + line for line in text.splitlines()]
        return note + lines[-tail:]

    def follow_logs(
        self, user: User, key: str, detail: Detail, container: Container | None, tail: int
    ) -> Generator[list[str]]:
        ref = parse_key(key)
        default = kind_info(ref.kind).default_container
        chosen, note = self._log_containers(detail, container)
        lines: queue.Queue[str | None] = queue.Queue(MAX_MERGED_QUEUE)
        client = self.as_user(user)
        follows = _Follows()
        for c in chosen:
            tag = "" if container else prefix(ref.name, c.pod, c.name, default) + " "
            path = log_path(ref.namespace, c.pod, c.name, {"tailLines": tail, "follow": "true"})
            threading.Thread(
                target=_pump, args=(client, path, tag, lines, follows), name=f"log-{c.pod}", daemon=True
            ).start()
        try:
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
            yield note + first[-tail:]
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
        finally:
            # The client went (or the logs ended): every follow still open is cut, so its pump ends.
            follows.stop()

    def act(self, user: User, key: str, action: str) -> str:
        ref = parse_key(key)
        kind, name = ref.kind, ref.name
        path = job_path(ref)
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
        try:
            path = jobs_path(ns, str(job["kind"]))
        except BadKey as exc:
            raise Invalid([("metadata.namespace", exc.errors[0][1])]) from None
        judged = jobs_path(ns, str(job["kind"]), {"dryRun": "All"})
        # With ConfigMaps to apply first, the job is judged (dry run) before anything is written, so a
        # refused job leaves no ConfigMap behind.
        if companions and not dry_run:
            self._post(user, judged, job)
        for config_map in companions:
            self._apply_config_map(user, ns, config_map, dry_run)
        self._post(user, judged if dry_run else path, job)
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
        query = {"dryRun": "All"} if dry_run else None
        try:
            path = config_map_path(ns, name, query)
        except BadKey as exc:
            raise Invalid([("", f"ConfigMap: {exc}")]) from None
        try:
            self.as_user(user).request("POST", config_maps_path(ns, query), config_map)
            return
        except ApiError as exc:
            if exc.status in (401, 403):
                raise NotAllowed(str(exc)) from None
            if exc.status != 409:
                raise Invalid([("", f"ConfigMap {name}: {exc}")]) from None
        patch = {"data": config_map.get("data") or {}}
        try:
            self.as_user(user).request("PATCH", path, patch, "application/merge-patch+json")
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


class _Follows:
    """The open answers of a followed log's pumps, so that whoever stops them can cut every one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: list[Any] = []
        self.stopped = threading.Event()

    def hold(self, answer: Any) -> bool:
        """Keep `answer` to cut at stop; False (and nothing kept) when already stopped."""
        with self._lock:
            if self.stopped.is_set():
                return False
            self._open.append(answer)
            return True

    def stop(self) -> None:
        with self._lock:
            self.stopped.set()
            held, self._open = self._open, []
        for answer in held:
            _cut(answer)


def _cut(answer: Any) -> None:
    """Shut the answer's socket: its pump blocked reading it wakes up at once (closing the file object
    would not wake it, and a follow of a quiet log sends nothing for hours)."""
    sock = getattr(getattr(getattr(answer, "fp", None), "raw", None), "_sock", None)
    if isinstance(sock, socket.socket):
        # The pump closes the answer itself once woken: closing it here too, from another thread, would
        # pull its file object away in the middle of its read.
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
            return
    with contextlib.suppress(Exception):
        answer.close()


def _pump(client: KubeClient, path: str, tag: str, out: queue.Queue[str | None], follows: _Follows) -> None:
    try:
        with client.open("GET", path, timeout=3600) as stream:
            if not follows.hold(stream):
                return
            while not follows.stopped.is_set():
                raw = stream.readline(LINE_BYTES)
                if not raw:
                    return
                line = tag + raw.decode("utf-8", "replace").rstrip("\n")
                while not follows.stopped.is_set():
                    try:
                        out.put(line, timeout=1)
                        break
                    except queue.Full:
                        continue  # the reader is slow, or gone: it stops us when it goes
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        pass  # cut at stop (an incomplete chunk), or the log ended or failed: the stream goes on without it
    finally:
        while not follows.stopped.is_set():
            with contextlib.suppress(queue.Full):
                out.put(None, timeout=1)
                break


def cluster_source(kubeconfig: str, auth: AuthSettings) -> tuple[Cluster, Authenticator | None]:
    """The cluster `kubeconfig` names ("": the pod's ServiceAccount), and the sign-in `auth` asks for, with
    its tokens reviewed by that cluster."""
    client = connect(kubeconfig)
    source = Cluster(client)
    source.start()
    review = None
    if auth.mode == "token":

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

    return source, Authenticator(auth, review)
