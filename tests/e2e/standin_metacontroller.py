"""Test-only STAND-IN for Metacontroller's CompositeController. This is NOT Metacontroller.

It exists only because the real Metacontroller v4.17.2 binary could not be built on this machine.
Upstream's go.mod declares ``module metacontroller`` (no domain), so it cannot be fetched by module
path; the single allowed workaround (a wrapper module with
``replace metacontroller => github.com/metacontroller/metacontroller v0.0.0-20260813213314-76b818bdc67b``,
see hack/build-control-plane.sh) failed with this exact error (the Go proxy host elided)::

    go: metacontroller@v0.0.0-00010101000000-000000000000 (replaced by
    github.com/metacontroller/metacontroller@v0.0.0-20260813213314-76b818bdc67b): reading
    <GOPROXY>/github.com/metacontroller/metacontroller/@v/v0.0.0-20260813213314-76b818bdc67b.mod:
    403 Forbidden
        server response: This module version is not available.

When ``$CACHE/bin/metacontroller`` exists the e2e suite runs the real binary instead. Passing e2e tests
against this stand-in show that the hooks work with a real kube-apiserver; they do not prove that
Metacontroller's own quirks are handled.

What it does (shared spec metacontroller.md §4.3 steps 1-13 and §5), out of cluster, stdlib only:

* watches ``compositecontrollers.metacontroller.k8s.io`` (CRD: ``standin-metacontroller-crds.yaml``) and,
  per controller, the parent and every ``childResources`` type (list + watch);
* a work queue per controller: dedupe by key, one worker per key at a time, ``resyncAfterSeconds``,
  HTTP 429 ``Retry-After``, per-key exponential backoff 5 ms .. 1000 s, ``resyncPeriodSeconds``;
* the finalizer ``metacontroller.io/compositecontroller-<name>`` when a finalize hook is set;
* claiming (adopt matching orphans, release non-matching owned children), ``generateSelector``;
* the v1/v2 request shape (``children`` keyed ``Kind.apiVersion``, every rule present), strict/loose
  response decoding, namespace defaulting, the label-invariant check that aborts the sync;
* delete-then-apply: deletes undesired owned children (UID precondition, Background propagation), then
  server-side-applies desired children (field manager ``metacontroller``, force) with a controllerRef
  ``{controller: true, blockOwnerDeletion: true}``, honouring OnDelete / Recreate / InPlace;
* the status write after children (even if child management failed), ``observedGeneration`` injected,
  skipped when deep-equal with Go semantics (``1`` and ``1.0`` differ), conflict retries.

Client-side throttling: by default NONE (every API request goes out at once), unlike Metacontroller, whose
client-go rate limiter defaults to ``--client-go-qps=5 --client-go-burst=10`` (a token bucket shared by
all its controllers). Pass ``--client-go-qps=5 --client-go-burst=10`` to model that bucket here (it
gates every request except watch reconnections, see ``KubeClient.watch``); ``bench/fanout_bench.py``
reports both.

Not implemented (a sync using them fails loudly): the customize hook / related objects, Rolling* update
strategies, ``webhook.service`` (no cluster DNS here), ETag, hook auth. Dynamic-apply's 3-way merge is
modelled as server-side apply, the simplification metacontroller.md §5.5 allows.

Run: ``python tests/e2e/standin_metacontroller.py --kubeconfig admin.kubeconfig
--health-probe-bind-address=127.0.0.1:PORT`` (``/readyz`` turns 200 once controllers are loaded).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import heapq
import http.client
import http.server
import json
import os
import re
import ssl
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
ObjKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

CC_GROUP = "metacontroller.k8s.io"
CC_API_VERSION = f"{CC_GROUP}/v1alpha1"
FIELD_MANAGER_DEFAULT = "metacontroller"
RESPONSE_KEYS = {"status", "children", "resyncAfterSeconds", "finalized"}
SYSTEM_METADATA = (
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
)
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"
GC_FINALIZERS = {"foregroundDeletion", "orphan"}

_log_lock = threading.Lock()
VERBOSITY = 1


def log(level: int, msg: str) -> None:
    if level <= VERBOSITY:
        with _log_lock:
            ts = time.strftime("%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}"
            print(f"{ts} standin-metacontroller: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- API client
class ApiError(Exception):
    def __init__(self, status: int, body: str, what: str) -> None:
        super().__init__(f"{what}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


@dataclass
class KubeConfig:
    host: str
    port: int
    ssl_context: ssl.SSLContext


def load_kubeconfig(path: str) -> KubeConfig:
    with open(path) as fh:
        text = fh.read()
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError:
        import yaml  # only needed for non-JSON kubeconfigs; the e2e harness writes JSON

        cfg = yaml.safe_load(text)
    ctx_name = cfg["current-context"]
    ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
    cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
    url = urllib.parse.urlsplit(cluster["server"])
    if url.scheme != "https" or url.hostname is None:
        raise SystemExit(f"unsupported server URL {cluster['server']}")
    sslctx = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    if "client-certificate" in user:
        sslctx.load_cert_chain(user["client-certificate"], user["client-key"])
    else:
        raise SystemExit("only client-certificate kubeconfigs are supported")
    return KubeConfig(url.hostname, url.port or 443, sslctx)


class TokenBucket:
    """client-go's ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``: ``accept()`` blocks for a token."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(burst, 1)
        self._tokens = float(self.burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def accept(self) -> None:
        with self._lock:  # serialises waiters, so tokens are handed out in arrival order
            now = time.monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens < 1.0:
                time.sleep((1.0 - self._tokens) / self.qps)
                self._tokens = 1.0
                self._last = time.monotonic()
            self._tokens -= 1.0


class KubeClient:
    """Minimal JSON client; one keep-alive connection per thread; optional client-go style throttle."""

    def __init__(self, cfg: KubeConfig, limiter: TokenBucket | None = None) -> None:
        self.cfg = cfg
        self.limiter = limiter
        self._local = threading.local()

    def _conn(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.cfg.host, self.cfg.port, context=self.cfg.ssl_context, timeout=timeout
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Any:
        if query:
            path = f"{path}?{urllib.parse.urlencode(query)}"
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        if self.limiter is not None:
            self.limiter.accept()
        for attempt in (1, 2):
            conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._conn(timeout)
                self._local.conn = conn
            try:
                conn.timeout = timeout
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                # A kept-alive connection may have been closed by the server: retry once fresh.
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
                continue
            if resp.status >= 300:
                raise ApiError(resp.status, raw.decode(errors="replace"), f"{method} {path}")
            return json.loads(raw) if raw else None
        raise AssertionError("unreachable")

    def watch(self, path: str, query: dict[str, str], timeout: float) -> Iterator[Obj]:
        # Watch (re)connections bypass the limiter: client-go's reflectors reconnect every 5-10 min, this
        # stand-in every 30 s, so counting them would overstate throttling. Lists are counted.
        conn = self._conn(timeout)
        try:
            conn.request(
                "GET", f"{path}?{urllib.parse.urlencode(query)}", headers={"Accept": "application/json"}
            )
            resp = conn.getresponse()
            if resp.status != 200:
                raise ApiError(resp.status, resp.read().decode(errors="replace"), f"WATCH {path}")
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()


# ----------------------------------------------------------------------------------------- discovery
def split_api_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


@dataclass(frozen=True)
class ResourceInfo:
    api_version: str
    resource: str
    kind: str
    namespaced: bool

    @property
    def group(self) -> str:
        return split_api_version(self.api_version)[0]

    def path(self, namespace: str = "", name: str = "", sub: str = "") -> str:
        base = f"/api/{self.api_version}" if not self.group else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.resource}"
        if name:
            base += f"/{name}"
        if sub:
            base += f"/{sub}"
        return base


class Discovery:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._cache: dict[str, list[Obj]] = {}

    def _resources(self, api_version: str, refresh: bool) -> list[Obj]:
        with self._lock:
            if refresh or api_version not in self._cache:
                group, _ = split_api_version(api_version)
                path = f"/apis/{api_version}" if group else f"/api/{api_version}"
                self._cache[api_version] = self.client.request("GET", path)["resources"]
            return self._cache[api_version]

    def by_resource(self, api_version: str, resource: str) -> ResourceInfo:
        for refresh in (False, True):
            for r in self._resources(api_version, refresh):
                if r["name"] == resource:
                    return ResourceInfo(api_version, resource, r["kind"], bool(r["namespaced"]))
        raise LookupError(f"discovery: can't find resource {resource} in apiVersion {api_version}")

    def by_kind(self, api_version: str, kind: str) -> ResourceInfo:
        for refresh in (False, True):
            for r in self._resources(api_version, refresh):
                if r["kind"] == kind and "/" not in r["name"]:
                    return ResourceInfo(api_version, r["name"], kind, bool(r["namespaced"]))
        raise LookupError(f"discovery: can't find kind {kind} in apiVersion {api_version}")


# ----------------------------------------------------------------------------------------- informer
def obj_key(obj: Obj) -> ObjKey:
    md = obj.get("metadata", {})
    return md.get("namespace", "") or "", md["name"]


EventHandler = Callable[[str, Obj | None, Obj | None], None]


class Informer:
    """List + watch one resource cluster-wide into a cache, calling ``handler(type, old, new)``."""

    def __init__(
        self, client: KubeClient, info: ResourceInfo, handler: EventHandler, stop: threading.Event
    ) -> None:
        self.client = client
        self.info = info
        self.handler = handler
        self.stop = stop
        self.synced = threading.Event()
        self._lock = threading.Lock()
        self._cache: dict[ObjKey, Obj] = {}
        self._thread = threading.Thread(target=self._run, name=f"informer-{info.resource}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def get(self, key: ObjKey) -> Obj | None:
        with self._lock:
            return self._cache.get(key)

    def list(self, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            return [o for (ns, _), o in self._cache.items() if namespace is None or ns == namespace]

    def _fill_type(self, obj: Obj) -> Obj:
        # List items of built-in types carry no apiVersion/kind; hooks expect both.
        obj.setdefault("apiVersion", self.info.api_version)
        obj.setdefault("kind", self.info.kind)
        return obj

    def _relist(self) -> str:
        data = self.client.request("GET", self.info.path())
        fresh = {obj_key(o): self._fill_type(o) for o in data.get("items") or []}
        with self._lock:
            old = self._cache
            self._cache = fresh
        for k, o in fresh.items():
            prev = old.get(k)
            if prev is None:
                self.handler("ADDED", None, o)
            elif prev["metadata"].get("resourceVersion") != o["metadata"].get("resourceVersion"):
                self.handler("MODIFIED", prev, o)
        for k, o in old.items():
            if k not in fresh:
                self.handler("DELETED", o, None)
        return str(data["metadata"]["resourceVersion"])

    def _run(self) -> None:
        rv = ""
        while not self.stop.is_set():
            try:
                if not rv:
                    rv = self._relist()
                    self.synced.set()
                query = {
                    "watch": "1",
                    "resourceVersion": rv,
                    "allowWatchBookmarks": "true",
                    "timeoutSeconds": "30",
                }
                for ev in self.client.watch(self.info.path(), query, timeout=60):
                    if self.stop.is_set():
                        return
                    typ, obj = ev["type"], ev["object"]
                    if typ == "ERROR":
                        rv = ""  # 410 Gone and friends: start over with a fresh list
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if typ == "BOOKMARK":
                        continue
                    self._fill_type(obj)
                    k = obj_key(obj)
                    with self._lock:
                        prev = self._cache.get(k)
                        if typ == "DELETED":
                            self._cache.pop(k, None)
                        else:
                            self._cache[k] = obj
                    self.handler(typ, prev, None if typ == "DELETED" else obj)
            except Exception as e:  # keep the informer alive; relist on any failure
                if self.stop.is_set():
                    return
                log(1, f"informer {self.info.resource}: {e}; relisting")
                rv = ""
                self.stop.wait(1.0)


# ----------------------------------------------------------------------------------------- work queue
class WorkQueue:
    """client-go workqueue semantics: dedupe, one worker per key, delayed and rate-limited adds."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self._cond = threading.Condition()
        self._queue: list[ObjKey] = []
        self._dirty: set[ObjKey] = set()
        self._processing: set[ObjKey] = set()
        self._delayed: list[tuple[float, int, ObjKey]] = []
        self._seq = 0
        self._failures: dict[ObjKey, int] = {}
        self._base, self._max = base_delay, max_delay
        self._shutdown = False

    def add(self, key: ObjKey) -> None:
        with self._cond:
            if self._shutdown or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: ObjKey, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            self._seq += 1
            heapq.heappush(self._delayed, (time.monotonic() + delay, self._seq, key))
            self._cond.notify_all()

    def add_rate_limited(self, key: ObjKey) -> None:
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        self.add_after(key, min(self._base * (2**n), self._max))

    def forget(self, key: ObjKey) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def get(self) -> ObjKey | None:
        with self._cond:
            while True:
                if self._shutdown:
                    return None
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    _, _, k = heapq.heappop(self._delayed)
                    if k not in self._dirty:
                        self._dirty.add(k)
                        if k not in self._processing:
                            self._queue.append(k)
                if self._queue:
                    key = self._queue.pop(0)
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                wait = self._delayed[0][0] - now if self._delayed else None
                self._cond.wait(wait)

    def done(self, key: ObjKey) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()


# ----------------------------------------------------------------------------------------- helpers
class SyncError(Exception):
    pass


class RetryAfter(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"retry after {seconds}s")
        self.seconds = seconds


_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration string such as ``10s`` or ``1m30s``."""
    parts = _DURATION_RE.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {text!r}")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def go_deep_equal(a: Any, b: Any) -> bool:
    """Equality of decoded JSON as Go's reflect.DeepEqual sees it: int64 and float64 differ."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(go_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(go_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def selector_matches(selector: Obj, labels: dict[str, str]) -> bool:
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def controller_ref(obj: Obj) -> Obj | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def labels_of(obj: Obj) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


# ----------------------------------------------------------------------------------------- controller
@dataclass
class ChildRule:
    info: ResourceInfo
    method: str
    informer: Informer


@dataclass
class Composite:
    """One CompositeController's informers, queue and workers."""

    mgr: Manager
    cc: Obj
    stop: threading.Event = field(default_factory=threading.Event)
    queue: WorkQueue = field(default_factory=WorkQueue)
    parent: ResourceInfo | None = None
    parent_informer: Informer | None = None
    rules: list[ChildRule] = field(default_factory=list)
    ssa_cache: dict[tuple[str, str, str, str], tuple[str, str, Any]] = field(default_factory=dict)
    ssa_lock: threading.Lock = field(default_factory=threading.Lock)
    event_tokens: dict[ObjKey, tuple[float, float]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.cc["metadata"]["name"])

    @property
    def spec(self) -> Obj:
        spec: Obj = self.cc.get("spec") or {}
        return spec

    @property
    def finalizer(self) -> str:
        return f"metacontroller.io/compositecontroller-{self.name}"

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> bool:
        """Set up informers and workers; False if the controller must be ignored (as upstream does)."""
        client, disc = self.mgr.client, self.mgr.discovery
        self.rules = []
        hooks = self.spec.get("hooks")
        if not hooks:
            raise SyncError("no hooks defined")
        pr = self.spec["parentResource"]
        group, version = split_api_version(pr["apiVersion"])
        crd = client.request(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{pr['resource']}.{group}"
        )
        ver = next((v for v in crd["spec"]["versions"] if v["name"] == version), None)
        if ver is None or "status" not in (ver.get("subresources") or {}):
            log(0, f"controller {self.name}: parent CRD lacks the status subresource for {version}; ignored")
            return False
        self.parent = ResourceInfo(
            pr["apiVersion"],
            pr["resource"],
            crd["spec"]["names"]["kind"],
            crd["spec"]["scope"] == "Namespaced",
        )
        for rule in self.spec.get("childResources") or []:
            info = disc.by_resource(rule["apiVersion"], rule["resource"])
            method = ((rule.get("updateStrategy") or {}).get("method")) or "OnDelete"
            if method.startswith("Rolling"):
                raise SyncError(f"stand-in does not implement {method} update strategy")
            inf = Informer(client, info, self._child_event, self.stop)
            self.rules.append(ChildRule(info, method, inf))
        self.parent_informer = Informer(client, self.parent, self._parent_event, self.stop)
        for inf in [self.parent_informer, *(r.informer for r in self.rules)]:
            inf.start()
        for inf in [self.parent_informer, *(r.informer for r in self.rules)]:
            while not inf.synced.wait(0.5):
                if self.stop.is_set():
                    return False
        for i in range(self.mgr.workers):
            threading.Thread(target=self._worker, name=f"{self.name}-worker-{i}", daemon=True).start()
        period = self.spec.get("resyncPeriodSeconds")
        if period:
            threading.Thread(target=self._resync_loop, args=(max(float(period), 1.0),), daemon=True).start()
        for p in self.parent_informer.list():
            self.queue.add(obj_key(p))
        log(
            1,
            f"controller {self.name}: started (parent {self.parent.resource}, {len(self.rules)} child types)",
        )
        return True

    def shutdown(self) -> None:
        self.stop.set()
        self.queue.shutdown()

    def _resync_loop(self, period: float) -> None:
        while not self.stop.wait(period):
            assert self.parent_informer is not None
            for p in self.parent_informer.list():
                self.queue.add(obj_key(p))

    # ---------------------------------------------------------------- event routing
    def _parent_event(self, typ: str, old: Obj | None, new: Obj | None) -> None:
        if typ == "MODIFIED" and old and new and self.spec["parentResource"].get("ignoreStatusChanges"):
            om, nm = old["metadata"], new["metadata"]
            if (
                om.get("generation") == nm.get("generation")
                and om.get("labels") == nm.get("labels")
                and om.get("annotations") == nm.get("annotations")
                and not nm.get("deletionTimestamp")
            ):
                return
        self.queue.add(obj_key(new or old or {}))

    def _owner_key(self, child: Obj, ref: Obj) -> ObjKey | None:
        assert self.parent is not None
        if (
            ref.get("kind") != self.parent.kind
            or split_api_version(ref.get("apiVersion", ""))[0] != self.parent.group
        ):
            return None
        ns = child["metadata"].get("namespace", "") if self.parent.namespaced else ""
        key = (ns, ref["name"])
        assert self.parent_informer is not None
        p = self.parent_informer.get(key)
        if p is not None and p["metadata"].get("uid") != ref.get("uid"):
            return None
        return key

    def _child_event(self, typ: str, old: Obj | None, new: Obj | None) -> None:
        same_rv = (
            old and new and old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion")
        )
        if typ == "MODIFIED" and same_rv:
            return
        for obj in (old, new):
            if obj is None:
                continue
            ref = controller_ref(obj)
            if ref is not None:
                key = self._owner_key(obj, ref)
                if key is not None:
                    self.queue.add(key)
            else:
                self._enqueue_matching_parents(obj)

    def _enqueue_matching_parents(self, orphan: Obj) -> None:
        assert self.parent_informer is not None and self.parent is not None
        ns = orphan["metadata"].get("namespace", "")
        for p in self.parent_informer.list(ns if self.parent.namespaced else None):
            try:
                sel = self._selector(p)
            except SyncError:
                continue
            if selector_matches(sel, labels_of(orphan)):
                self.queue.add(obj_key(p))

    # ---------------------------------------------------------------- workers
    def _worker(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            try:
                self.sync(key)
                self.queue.forget(key)
            except RetryAfter as e:
                self.queue.forget(key)
                self.queue.add_after(key, e.seconds)
            except Exception as e:  # any sync failure is retried with backoff
                log(0, f"controller {self.name}: sync {key[0]}/{key[1]} failed: {e}")
                if VERBOSITY >= 3:
                    log(3, traceback.format_exc())
                self._warning_event(key, f"Sync error: {e}")
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    # ---------------------------------------------------------------- the sync (metacontroller.md §4.3)
    def _selector(self, parent: Obj) -> Obj:
        if self.spec.get("generateSelector"):
            return {"matchLabels": {"controller-uid": parent["metadata"]["uid"]}}
        sel = (parent.get("spec") or {}).get("selector") or {}
        if not sel.get("matchLabels") and not sel.get("matchExpressions"):
            raise SyncError("parent spec.selector is empty; set it or use generateSelector")
        return dict(sel)

    def _controller_ref_for(self, parent: Obj) -> Obj:
        md = parent["metadata"]
        return {
            "apiVersion": parent["apiVersion"],
            "kind": parent["kind"],
            "name": md["name"],
            "uid": md["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def sync(self, key: ObjKey) -> None:
        assert self.parent is not None and self.parent_informer is not None
        cached = self.parent_informer.get(key)
        if cached is None:
            return
        parent = copy.deepcopy(cached)
        hooks = self.spec["hooks"]
        label_sel = self.spec["parentResource"].get("labelSelector")
        matches_label_sel = label_sel is None or selector_matches(label_sel, labels_of(parent))
        finalizers = list(parent["metadata"].get("finalizers") or [])
        if not matches_label_sel and self.finalizer not in finalizers:
            return
        deleting = bool(parent["metadata"].get("deletionTimestamp"))
        has_finalize = bool(hooks.get("finalize"))
        if has_finalize and self.finalizer not in finalizers and not deleting:
            parent = self._update_finalizers(parent, add=True)
        elif not has_finalize and self.finalizer in finalizers:
            parent = self._update_finalizers(parent, add=False)

        selector = self._selector(parent)
        observed = self._claim_children(parent, selector, deleting)

        if hooks.get("customize"):
            raise SyncError("stand-in does not implement the customize hook (related objects)")
        finalizing = has_finalize and (deleting or not matches_label_sel)
        hook = hooks["finalize"] if finalizing else hooks.get("sync")
        if not hook:
            raise SyncError("sync hook not defined")
        request = {
            "controller": self.cc,
            "parent": parent,
            "children": self._request_children(parent, observed, hook),
            "related": {},
            "finalizing": finalizing,
        }
        t0 = time.monotonic()
        response = self.mgr.call_hook(hook, request)
        which = "finalize" if finalizing else "sync"
        log(2, f"controller {self.name}: {which} {key} {time.monotonic() - t0:.3f}s")

        desired: list[Obj] = list(response.get("children") or [])
        pns = parent["metadata"].get("namespace", "") if self.parent.namespaced else ""
        for child in desired:
            md = child.setdefault("metadata", {})
            if not md.get("namespace") and pns:
                md["namespace"] = pns
        resync = response.get("resyncAfterSeconds")
        if isinstance(resync, int | float) and resync > 0:
            self.queue.add_after(key, float(resync))
        if response.get("finalized"):
            parent = self._update_finalizers(parent, add=False)

        if self.spec.get("generateSelector"):
            for child in desired:
                child["metadata"].setdefault("labels", {}).setdefault(
                    "controller-uid", parent["metadata"]["uid"]
                )
        for child in desired:
            if not selector_matches(selector, labels_of(child)):
                raise SyncError(
                    f"labels on desired child {child.get('kind')} {child['metadata'].get('name')} "
                    "don't match parent selector"
                )

        child_error: Exception | None = None
        fins = set(parent["metadata"].get("finalizers") or [])
        should_finalize = has_finalize and self.finalizer in fins and not (fins & GC_FINALIZERS)
        if not deleting or should_finalize:
            try:
                self._manage_children(parent, observed, desired)
            except Exception as e:  # status is written even when children failed
                child_error = e
        self._write_status(parent, response.get("status"))
        if child_error is not None:
            raise child_error

    def _update_finalizers(self, parent: Obj, *, add: bool) -> Obj:
        assert self.parent is not None
        md = parent["metadata"]
        path = self.parent.path(md.get("namespace", ""), md["name"])
        for _ in range(10):
            try:
                live = self.mgr.client.request("GET", path)
            except ApiError as e:
                if e.status == 404:
                    return parent
                raise
            if live["metadata"]["uid"] != md["uid"]:
                return parent
            fins = list(live["metadata"].get("finalizers") or [])
            if add == (self.finalizer in fins):
                return dict(live)
            if add:
                if live["metadata"].get("deletionTimestamp"):
                    return dict(live)
                fins.append(self.finalizer)
            else:
                fins = [f for f in fins if f != self.finalizer]
            live["metadata"]["finalizers"] = fins
            try:
                updated: Obj = self.mgr.client.request("PUT", path, live)
                return updated
            except ApiError as e:
                if e.status == 409:
                    continue
                if e.status == 404:
                    return parent
                raise
        raise SyncError("finalizer update kept conflicting")

    def _claim_children(self, parent: Obj, selector: Obj, deleting: bool) -> dict[int, dict[ObjKey, Obj]]:
        assert self.parent is not None
        uid = parent["metadata"]["uid"]
        ns = parent["metadata"].get("namespace", "") if self.parent.namespaced else None
        out: dict[int, dict[ObjKey, Obj]] = {}
        for i, rule in enumerate(self.rules):
            owned: dict[ObjKey, Obj] = {}
            for obj in rule.informer.list(ns):
                ref = controller_ref(obj)
                if ref is not None and ref.get("uid") != uid:
                    continue
                match = selector_matches(selector, labels_of(obj))
                if ref is not None:
                    if match:
                        owned[obj_key(obj)] = obj
                    elif not deleting:
                        self._release(rule.info, obj, uid)
                elif match and not deleting and not obj["metadata"].get("deletionTimestamp"):
                    adopted = self._adopt(rule.info, parent, obj)
                    if adopted is not None:
                        owned[obj_key(adopted)] = adopted
            out[i] = owned
        return out

    def _adopt(self, info: ResourceInfo, parent: Obj, obj: Obj) -> Obj | None:
        assert self.parent is not None
        pmd = parent["metadata"]
        try:
            fresh = self.mgr.client.request("GET", self.parent.path(pmd.get("namespace", ""), pmd["name"]))
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        if fresh["metadata"]["uid"] != pmd["uid"] or fresh["metadata"].get("deletionTimestamp"):
            return None
        md = obj["metadata"]
        refs = [*(md.get("ownerReferences") or []), self._controller_ref_for(parent)]
        patch = {
            "metadata": {"ownerReferences": refs, "resourceVersion": md["resourceVersion"], "uid": md["uid"]}
        }
        try:
            adopted: Obj = self.mgr.client.request(
                "PATCH", info.path(md.get("namespace", ""), md["name"]), patch,
                content_type="application/merge-patch+json",
            )  # fmt: skip
        except ApiError as e:
            if e.status in (404, 409, 422):
                return None
            raise
        adopted.setdefault("apiVersion", info.api_version)
        adopted.setdefault("kind", info.kind)
        log(1, f"controller {self.name}: adopted {info.kind} {md.get('namespace', '')}/{md['name']}")
        return adopted

    def _release(self, info: ResourceInfo, obj: Obj, uid: str) -> None:
        md = obj["metadata"]
        refs = [r for r in md.get("ownerReferences") or [] if r.get("uid") != uid]
        patch = {
            "metadata": {
                "ownerReferences": refs or None,
                "resourceVersion": md["resourceVersion"],
                "uid": md["uid"],
            }
        }
        try:
            self.mgr.client.request(
                "PATCH", info.path(md.get("namespace", ""), md["name"]), patch,
                content_type="application/merge-patch+json",
            )  # fmt: skip
            log(1, f"controller {self.name}: released {info.kind} {md.get('namespace', '')}/{md['name']}")
        except ApiError as e:
            if e.status not in (404, 409, 422):
                raise

    def _request_children(self, parent: Obj, observed: dict[int, dict[ObjKey, Obj]], hook: Obj) -> Obj:
        assert self.parent is not None
        v2 = hook.get("version") == "v2"
        out: Obj = {}
        for i, rule in enumerate(self.rules):
            group_key = f"{rule.info.kind}.{rule.info.api_version}"
            inner: Obj = out.setdefault(group_key, {})
            for (ns, name), obj in observed[i].items():
                if v2:
                    k = f"{ns}/{name}" if ns else name
                else:
                    k = f"{ns}/{name}" if (not self.parent.namespaced and ns) else name
                inner[k] = obj
        return out

    def _rule_for(self, child: Obj) -> ChildRule | None:
        for rule in self.rules:
            if rule.info.api_version == child.get("apiVersion") and rule.info.kind == child.get("kind"):
                return rule
        return None

    def _manage_children(
        self, parent: Obj, observed: dict[int, dict[ObjKey, Obj]], desired: list[Obj]
    ) -> None:
        errors: list[str] = []
        wanted = {(c.get("apiVersion"), c.get("kind"), *obj_key(c)) for c in desired}
        # Phase A: delete owned children that are no longer desired.
        for i, rule in enumerate(self.rules):
            for (ns, name), obj in observed[i].items():
                if (rule.info.api_version, rule.info.kind, ns, name) in wanted:
                    continue
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                try:
                    self._delete(rule.info, obj)
                except ApiError as e:
                    errors.append(str(e))

        # Phase B: create or update, grouped by group, version, kind like upstream.
        def gvk(c: Obj) -> tuple[str, str, str]:
            g, v = split_api_version(str(c.get("apiVersion", "")))
            return g, v, str(c.get("kind", ""))

        for child in sorted(desired, key=gvk):
            try:
                self._apply_child(parent, observed, child)
            except Exception as e:  # aggregate like upstream and keep going
                errors.append(f"{child.get('kind')} {child['metadata'].get('name')}: {e}")
        if errors:
            raise SyncError("; ".join(errors))

    def _delete(self, info: ResourceInfo, obj: Obj) -> None:
        md = obj["metadata"]
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
            "preconditions": {"uid": md["uid"]},
        }
        try:
            self.mgr.client.request("DELETE", info.path(md.get("namespace", ""), md["name"]), body)
            log(1, f"controller {self.name}: deleted {info.kind} {md.get('namespace', '')}/{md['name']}")
        except ApiError as e:
            if e.status not in (404, 409):
                raise

    def _apply_child(self, parent: Obj, observed: dict[int, dict[ObjKey, Obj]], child: Obj) -> None:
        rule = self._rule_for(child)
        if rule is not None:
            info = rule.info
            method = rule.method
            current = observed[self.rules.index(rule)].get(obj_key(child))
        else:
            # Upstream creates such children but never observes or manages them again.
            info = self.mgr.discovery.by_kind(str(child.get("apiVersion")), str(child.get("kind")))
            method, current = "OnDelete", None
        body = copy.deepcopy(child)
        md = body.setdefault("metadata", {})
        for f in SYSTEM_METADATA:
            md.pop(f, None)
        body.pop("status", None)
        if md.get("annotations"):
            md["annotations"].pop(LAST_APPLIED, None)
        ref = self._controller_ref_for(parent)
        refs = [r for r in md.get("ownerReferences") or [] if r.get("uid") != ref["uid"]]
        md["ownerReferences"] = [*refs, ref]
        ns, name = obj_key(body)
        path = info.path(ns, name)
        query = {"fieldManager": self.mgr.field_manager, "force": "true"}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        cache_key = (info.group, info.kind, ns, name)

        if current is not None:
            if current["metadata"].get("deletionTimestamp"):
                return
            cmd = current["metadata"]
            version = cmd.get("generation") or cmd.get("resourceVersion")
            with self.ssa_lock:
                hit = self.ssa_cache.get(cache_key)
            if hit == (digest, cmd.get("uid"), version):
                return
            if method == "OnDelete":
                return
            if method == "Recreate":
                try:
                    dry = self.mgr.client.request(
                        "PATCH",
                        path,
                        body,
                        query={**query, "dryRun": "All"},
                        content_type="application/apply-patch+yaml",
                    )
                except ApiError as e:
                    if e.status in (400, 403, 422):
                        return
                    raise
                if _comparable(dry) != _comparable(current):
                    self._delete(info, current)
                return
        result = self.mgr.client.request(
            "PATCH", path, body, query=query, content_type="application/apply-patch+yaml"
        )
        rmd = result["metadata"]
        with self.ssa_lock:
            self.ssa_cache[cache_key] = (
                digest,
                rmd.get("uid"),
                rmd.get("generation") or rmd.get("resourceVersion"),
            )
        if current is None:
            log(1, f"controller {self.name}: applied {info.kind} {ns}/{name}")

    def _write_status(self, parent: Obj, status: Any) -> None:
        assert self.parent is not None
        desired = dict(status) if isinstance(status, dict) else {}
        desired["observedGeneration"] = parent["metadata"].get("generation")
        md = parent["metadata"]
        path = self.parent.path(md.get("namespace", ""), md["name"])
        for _ in range(5):
            try:
                live = self.mgr.client.request("GET", path)
            except ApiError as e:
                if e.status == 404:
                    return
                raise
            if live["metadata"]["uid"] != md["uid"]:
                return
            if go_deep_equal(live.get("status"), desired):
                return
            live["status"] = desired
            try:
                self.mgr.client.request("PUT", path + "/status", live)
                return
            except ApiError as e:
                if e.status == 409:
                    time.sleep(0.01)
                    continue
                if e.status == 404:
                    return
                raise

    def _warning_event(self, key: ObjKey, message: str) -> None:
        # Upstream rate-limits events per object (burst 25, then 1 per 5 minutes).
        assert self.parent is not None and self.parent_informer is not None
        now = time.monotonic()
        tokens, last = self.event_tokens.get(key, (25.0, now))
        tokens = min(25.0, tokens + (now - last) / 300.0)
        if tokens < 1:
            self.event_tokens[key] = (tokens, now)
            return
        self.event_tokens[key] = (tokens - 1, now)
        parent = self.parent_informer.get(key)
        if parent is None:
            return
        pmd = parent["metadata"]
        ns = pmd.get("namespace") or "default"
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{pmd['name']}.", "namespace": ns},
            "involvedObject": {
                "apiVersion": parent["apiVersion"],
                "kind": parent["kind"],
                "name": pmd["name"],
                "namespace": pmd.get("namespace", ""),
                "uid": pmd["uid"],
            },
            "reason": "SyncError",
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": "metacontroller"},
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
        }
        try:
            self.mgr.client.request("POST", f"/api/v1/namespaces/{ns}/events", event)
        except Exception as e:  # events are best-effort
            log(2, f"event write failed: {e}")


def _comparable(obj: Obj) -> Obj:
    o = copy.deepcopy(obj)
    md = o.get("metadata", {})
    for f in ("managedFields", "resourceVersion", "generation"):
        md.pop(f, None)
    return o


# ----------------------------------------------------------------------------------------- manager
class Manager:
    def __init__(
        self, client: KubeClient, *, workers: int, field_manager: str, discovery_interval: float
    ) -> None:
        self.client = client
        self.discovery = Discovery(client)
        self.workers = workers
        self.field_manager = field_manager
        self.discovery_interval = discovery_interval
        self.stop = threading.Event()
        self.ready = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[str, tuple[str, Composite]] = {}
        self._hook_ssl: dict[str, ssl.SSLContext] = {}

    def run(self) -> None:
        info = ResourceInfo(CC_API_VERSION, "compositecontrollers", "CompositeController", False)
        inf = Informer(self.client, info, self._cc_event, self.stop)
        inf.start()
        while not inf.synced.wait(1.0):
            log(1, "waiting for compositecontrollers to be listable (is the CRD installed?)")
        self.ready.set()
        log(1, "ready")
        self.stop.wait()
        with self._lock:
            for _, comp in self._running.values():
                comp.shutdown()

    def _cc_event(self, typ: str, old: Obj | None, new: Obj | None) -> None:
        name = (new or old or {})["metadata"]["name"]
        with self._lock:
            current = self._running.get(name)
            if typ == "DELETED" or new is None:
                if current:
                    current[1].shutdown()
                    del self._running[name]
                return
            spec_digest = json.dumps(new.get("spec"), sort_keys=True)
            if current and current[0] == spec_digest:
                return  # upstream restarts a controller only when its spec changes
            if current:
                current[1].shutdown()
            comp = Composite(self, new)
            self._running[name] = (spec_digest, comp)
        threading.Thread(
            target=self._start_composite, args=(comp,), name=f"start-{name}", daemon=True
        ).start()

    def _start_composite(self, comp: Composite) -> None:
        while not comp.stop.is_set():
            try:
                comp.start()
                return
            except Exception as e:  # e.g. the parent CRD is not there yet
                log(0, f"controller {comp.name}: cannot start: {e}; retrying in {self.discovery_interval}s")
                comp.stop.wait(self.discovery_interval)

    def call_hook(self, hook: Obj, request: Obj) -> Obj:
        webhook = hook.get("webhook") or {}
        url = webhook.get("url")
        if not url:
            raise SyncError("stand-in supports only webhook.url hooks (no cluster DNS for webhook.service)")
        timeout = 10.0
        if webhook.get("timeout"):
            try:
                timeout = parse_go_duration(str(webhook["timeout"]))
            except ValueError:
                timeout = 10.0
            if timeout <= 0:
                timeout = 10.0
        u = urllib.parse.urlsplit(url)
        if u.hostname is None:
            raise SyncError(f"invalid hook url {url}")
        if u.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                u.hostname, u.port or 443, timeout=timeout, context=self._hook_ssl_context(webhook)
            )
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        try:
            conn.request(
                "POST", path, body=json.dumps(request).encode(), headers={"Content-Type": "application/json"}
            )
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise SyncError(f"sync hook failed: {url}: {e}") from e
        finally:
            conn.close()
        if resp.status == 429:
            raise RetryAfter(_retry_after_seconds(resp.getheader("Retry-After")))
        if resp.status != 200:
            raise SyncError(
                f"sync hook failed: {url}: HTTP {resp.status}: {raw[:500].decode(errors='replace')}"
            )
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as e:
            raise SyncError(f"sync hook returned invalid JSON: {e}") from e
        if not isinstance(body, dict):
            raise SyncError("sync hook response is not a JSON object")
        mode = webhook.get("responseUnMarshallMode") or ("strict" if hook.get("version") == "v2" else "loose")
        if mode == "strict":
            unknown = set(body) - RESPONSE_KEYS
            if unknown:
                raise SyncError(f"sync hook response has unknown fields {sorted(unknown)} (strict mode)")
        if body.get("children") is not None and not isinstance(body["children"], list):
            raise SyncError("sync hook response: children must be a list")
        return body

    def _hook_ssl_context(self, webhook: Obj) -> ssl.SSLContext:
        inline = ((webhook.get("caBundle") or {}).get("inline")) or ""
        with self._lock:
            ctx = self._hook_ssl.get(inline)
            if ctx is None:
                ctx = ssl.create_default_context()
                if inline:
                    with tempfile.NamedTemporaryFile("w", suffix=".crt", delete=False) as fh:
                        fh.write(inline)
                    try:
                        ctx.load_verify_locations(cafile=fh.name)
                    finally:
                        os.unlink(fh.name)
                self._hook_ssl[inline] = ctx
            return ctx


def _retry_after_seconds(value: str | None) -> float:
    if not value:
        return 1.0
    try:
        return max(float(int(value)), 0.0)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
        except (TypeError, ValueError):
            return 1.0


# ----------------------------------------------------------------------------------------- main
def _serve_health(address: str, mgr: Manager) -> None:
    host, _, port = address.rpartition(":")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path.startswith("/healthz") or (self.path.startswith("/readyz") and mgr.ready.is_set())
            self.send_response(200 if ok else 503)
            self.end_headers()
            self.wfile.write(b"ok" if ok else b"not ready")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
    threading.Thread(target=srv.serve_forever, name="health", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    global VERBOSITY
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    ap.add_argument("--workers", type=int, default=5)
    ap.add_argument(
        "--discovery-interval", default="2s", help="retry period for controllers that cannot start"
    )
    ap.add_argument("--field-manager", default=FIELD_MANAGER_DEFAULT)
    ap.add_argument(
        "--health-probe-bind-address", default="0", help="host:port for /healthz and /readyz; 0=off"
    )
    ap.add_argument(
        "--client-go-qps",
        type=float,
        default=0.0,
        help="client-side request rate limit like Metacontroller's flag (its default: 5); 0 = no throttling",
    )
    ap.add_argument(
        "--client-go-burst", type=int, default=10, help="token bucket size with --client-go-qps (default 10)"
    )
    ap.add_argument("-v", "--verbosity", type=int, default=1)
    args = ap.parse_args(argv)
    if not args.kubeconfig:
        ap.error("--kubeconfig or KUBECONFIG is required")
    VERBOSITY = args.verbosity
    log(0, "NOTE: this is the e2e stand-in, NOT Metacontroller (the real binary could not be built)")
    limiter = TokenBucket(args.client_go_qps, args.client_go_burst) if args.client_go_qps > 0 else None
    throttle = f"qps={args.client_go_qps:g} burst={args.client_go_burst}" if limiter else "none"
    log(0, f"client-side throttling: {throttle}")
    client = KubeClient(load_kubeconfig(args.kubeconfig), limiter)
    mgr = Manager(
        client,
        workers=args.workers,
        field_manager=args.field_manager,
        discovery_interval=parse_go_duration(args.discovery_interval),
    )
    if args.health_probe_bind_address not in ("0", ""):
        _serve_health(args.health_probe_bind_address, mgr)
    import signal

    signal.signal(signal.SIGTERM, lambda *_: mgr.stop.set())
    signal.signal(signal.SIGINT, lambda *_: mgr.stop.set())
    mgr.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
