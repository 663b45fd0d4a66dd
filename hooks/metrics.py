"""The hook server's Prometheus metrics: Kubeflow's job counters, and sync latency and size per kind.

Kubeflow's controller bumps `training_operator_jobs_*_total{job_namespace,framework}` where its reconcile
loop changes a job's status. The sync hook is that loop here, so the counters move where a sync computes
a status that differs from the one Metacontroller sent (`record_transitions`), plus `deleted` when the
TTL deletion succeeds.

Metacontroller retries a sync whose status write failed, and the retry recomputes the same transition.
Each process remembers the transitions it counted (an LRU of job uid + transition), so a retry answered
by the same process is not counted again; one answered by another worker process or pod is. A
transition is thus counted at most once per hook process (workers x replicas) while its entry is in
the LRU.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from prometheus_client import Counter, Histogram

from trainop.api import constants as c
from trainop.api.jsonpath import dig
from trainop.frameworks import KINDS

Json = dict[str, Any]
LABELS = ("job_namespace", "framework")
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

CREATED = Counter("training_operator_jobs_created_total", "Counts number of jobs created", LABELS)
DELETED = Counter("training_operator_jobs_deleted_total", "Counts number of jobs deleted", LABELS)
SUCCESSFUL = Counter("training_operator_jobs_successful_total", "Counts number of jobs successful", LABELS)
FAILED = Counter("training_operator_jobs_failed_total", "Counts number of jobs failed", LABELS)
RESTARTED = Counter("training_operator_jobs_restarted_total", "Counts number of jobs restarted", LABELS)

# Small jobs take ~1 ms, 1000 replicas a few hundred; the buckets span both.
LATENCY = Histogram(
    "trainop_hook_duration_seconds",
    "Time the hook server spent on one sync or finalize call, from body read to response encoded",
    ("hook", "kind"),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
REQUEST_SIZE = Histogram(
    "trainop_hook_request_size_bytes",
    "Size of the request body Metacontroller sent (the job and its observed children)",
    ("hook", "kind"),
    buckets=tuple(float(4**n * 1024) for n in range(9)),  # 1 KiB .. 64 MiB
)
REQUESTS = Counter("trainop_hook_requests_total", "Requests by route and HTTP status code", ("hook", "code"))
ROUTES = ("/sync", "/finalize", "/healthz")


class Seen:
    """A bounded, thread-safe set of recently counted transitions (least recently used out first)."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._keys: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, key: Hashable) -> bool:
        """True the first time `key` is offered while it is remembered; records it."""
        with self._lock:
            if key in self._keys:
                self._keys.move_to_end(key)
                return False
            self._keys[key] = None
            if len(self._keys) > self.size:
                self._keys.popitem(last=False)
            return True


SEEN = Seen()


def _labels(parent: Json) -> tuple[str, str]:
    info = KINDS[str(parent.get("kind"))]
    namespace = dig(parent, "metadata", "namespace") or "default"
    # A namespace the apiserver could not have sent gets one label value, so a hostile caller cannot
    # grow the label set without bound.
    valid = isinstance(namespace, str) and NAMESPACE.fullmatch(namespace) is not None
    return (namespace if valid else "invalid"), info.framework


def _true(status: Any, ctype: str) -> bool:
    conditions = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(x, dict) and x.get("type") == ctype and x.get("status") == "True" for x in conditions
    )


def _restarted_pods(before: Any, after: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Pods newly recorded in status.podRestarts: each is one pod the job is recreating."""
    old = before.get("podRestarts") if isinstance(before, dict) else None
    old = old if isinstance(old, dict) else {}
    new = after.get("podRestarts")
    for name, entry in (new if isinstance(new, dict) else {}).items():
        uid = entry.get("uid") if isinstance(entry, dict) else None
        previous = old.get(name)
        if uid and not (isinstance(previous, dict) and previous.get("uid") == uid):
            yield name, str(uid)


def record_transitions(parent: Json, status: Json, seen: Seen = SEEN) -> None:
    """Count the transitions from the status Metacontroller sent to the one the sync computed."""
    before = parent.get("status")
    labels = _labels(parent)
    uid = dig(parent, "metadata", "uid")
    job_key = uid if isinstance(uid, str) and uid else f"{labels[0]}/{dig(parent, 'metadata', 'name')}"
    for counter, ctype in ((CREATED, c.CREATED), (SUCCESSFUL, c.SUCCEEDED), (FAILED, c.FAILED)):
        if _true(status, ctype) and not _true(before, ctype) and seen.first_time((job_key, ctype)):
            counter.labels(*labels).inc()
    for pod in _restarted_pods(before, status):
        if seen.first_time((job_key, "restart", *pod)):
            RESTARTED.labels(*labels).inc()


def record_deleted(parent: Json) -> None:
    DELETED.labels(*_labels(parent)).inc()


def record_call(hook: str, kind: str, seconds: float, size: int) -> None:
    """One answered sync or finalize call of a job of `kind`."""
    LATENCY.labels(hook, kind).observe(seconds)
    REQUEST_SIZE.labels(hook, kind).observe(size)


def record_response(path: str, code: int) -> None:
    """Every response, bad requests and errors included; unknown paths share one label value."""
    route = path.strip("/") if path in ROUTES else "other"
    REQUESTS.labels(route, str(code)).inc()
