"""The hook server's Prometheus metrics: Kubeflow's job counters, and sync latency and size per kind.

Kubeflow's controller bumps `training_operator_jobs_*_total{job_namespace,framework}` where its reconcile
loop changes a job's status. The sync hook is that loop here, so the counters move where a sync computes
a status that differs from the one Metacontroller sent (`transitions`), plus `deleted` when the TTL
deletion succeeds. A sync's body is only a claim, so its transitions are counted (`count_confirmed`) by
the recorder's writer thread once the apiserver has shown it holds a job of that name and uid with the
spec the sync saw (hooks.recorder), with the labels of the apiserver's copy; a hook without API
credentials counts none. Each counter keeps at most MAX_SERIES label sets per process; the rest share
`job_namespace="other"` (docs/limits.md#events-and-metrics).

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
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import Counter, Histogram

from trainop.api import constants as c
from trainop.api.jsonpath import dig
from trainop.frameworks import KINDS
from trainop.jsontypes import Json

LABELS = ("job_namespace", "framework")
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

CREATED = Counter("training_operator_jobs_created_total", "Counts number of jobs created", LABELS)
DELETED = Counter("training_operator_jobs_deleted_total", "Counts number of jobs deleted", LABELS)
SUCCESSFUL = Counter("training_operator_jobs_successful_total", "Counts number of jobs successful", LABELS)
FAILED = Counter("training_operator_jobs_failed_total", "Counts number of jobs failed", LABELS)
RESTARTED = Counter("training_operator_jobs_restarted_total", "Counts number of jobs restarted", LABELS)
COUNTERS = {
    "created": CREATED,
    "deleted": DELETED,
    "successful": SUCCESSFUL,
    "failed": FAILED,
    "restarted": RESTARTED,
}
# Distinct (namespace, framework) pairs one counter keeps per process: beyond, `job_namespace="other"`.
MAX_SERIES = 1000
OTHER = "other"
OVERFLOW = Counter(
    "trainop_hook_metric_series_overflow_total",
    'Increments counted under job_namespace="other" because the counter had MAX_SERIES label sets',
    ("metric",),
)
EVENTS_DROPPED = Counter(
    "trainop_hook_events_dropped_total",
    "Events a sync implied that were not written, by why (rate limits, no matching job on the apiserver...)",
    ("reason",),
)

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
ROUTES = ("/sync", "/finalize", "/customize", "/healthz")


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


class Series:
    """The label sets each counter has used in this process, at most `limit` per counter."""

    def __init__(self, limit: int = MAX_SERIES) -> None:
        self.limit = limit
        self._used: dict[str, set[tuple[str, str]]] = {}
        self._lock = threading.Lock()

    def labels(self, metric: str, labels: tuple[str, str]) -> tuple[str, str]:
        """`labels`, or the namespace replaced by OTHER once `metric` has `limit` other label sets."""
        with self._lock:
            used = self._used.setdefault(metric, set())
            if labels in used:
                return labels
            if len(used) < self.limit:
                used.add(labels)
                return labels
        OVERFLOW.labels(metric).inc()
        return OTHER, labels[1]


SERIES = Series()


def _labels(job: Json) -> tuple[str, str]:
    info = KINDS[str(job.get("kind"))]
    namespace = dig(job, "metadata", "namespace") or "default"
    # The apiserver's copy always has a valid namespace; anything else gets one label value.
    valid = isinstance(namespace, str) and NAMESPACE.fullmatch(namespace) is not None
    return (namespace if valid else "invalid"), info.framework


def _inc(name: str, labels: tuple[str, str], series: Series) -> None:
    COUNTERS[name].labels(*series.labels(name, labels)).inc()


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


def transitions(parent: Json, status: Json) -> tuple[tuple[str, ...], ...]:
    """The transitions from the status Metacontroller sent to the one the sync computed: ("created",),
    ("successful",), ("failed",) and ("restarted", pod name, pod uid) per pod being recreated."""
    before = parent.get("status")
    out: list[tuple[str, ...]] = []
    for name, ctype in (("created", c.CREATED), ("successful", c.SUCCEEDED), ("failed", c.FAILED)):
        if _true(status, ctype) and not _true(before, ctype):
            out.append((name,))
    out += [("restarted", *pod) for pod in _restarted_pods(before, status)]
    return tuple(out)


def count_confirmed(
    job: Json, found: Iterable[tuple[str, ...]], seen: Seen = SEEN, series: Series = SERIES
) -> None:
    """Count `found` for `job`, the apiserver's copy of the job the sync was about."""
    labels = _labels(job)
    job_key = str(dig(job, "metadata", "uid"))
    for transition in found:
        if transition[0] in COUNTERS and seen.first_time((job_key, *transition)):
            _inc(transition[0], labels, series)


def record_deleted(job: Json, series: Series = SERIES) -> None:
    """The TTL deletion of `job` (the apiserver's copy) succeeded."""
    _inc("deleted", _labels(job), series)


def record_dropped_events(reason: str, count: int = 1) -> None:
    EVENTS_DROPPED.labels(reason).inc(count)


def record_call(hook: str, kind: str, seconds: float, size: int) -> None:
    """One answered sync or finalize call of a job of `kind`."""
    LATENCY.labels(hook, kind).observe(seconds)
    REQUEST_SIZE.labels(hook, kind).observe(size)


def record_response(path: str, code: int) -> None:
    """Every response, bad requests and errors included; unknown paths share one label value."""
    route = path.strip("/") if path in ROUTES else "other"
    REQUESTS.labels(route, str(code)).inc()
