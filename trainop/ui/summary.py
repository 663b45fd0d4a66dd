"""One job as a list row: the few fields a list shows, so pages never carry whole objects, and how a
list is filtered, sorted (stably) and cut into pages."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainop.api.times import is_timestamp, parse_timestamp
from trainop.extensions import EXTENSIONS
from trainop.jsontypes import Json

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# States a job can be in, in the order a filter offers them.
STATES = ("Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed", "Pending")
SORT_KEYS = ("created", "name", "namespace", "kind", "state")
PAGE_SIZES = (25, 50, 100)


@dataclass(frozen=True)
class Replicas:
    active: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Summary:
    key: str  # how the data source finds the job again: `ns/kind/name` on a cluster, the run's folder here
    kind: str
    namespace: str
    name: str
    state: str
    reason: str
    message: str
    replicas: tuple[tuple[str, Replicas], ...]
    restarts: int
    created: datetime | None
    finished: datetime | None
    queue: str
    uid: str = ""
    labels: tuple[tuple[str, str], ...] = field(default=())
    # The annotations the extensions' links are decided on (the TensorBoard's log directory), so that a
    # row links what the job's page does.
    annotations: tuple[tuple[str, str], ...] = field(default=())
    # Where what an extension link points to is, by its key, when the source knows (a local run's record
    # of its `trainop run --tensorboard`).
    served: tuple[tuple[str, str], ...] = field(default=())

    def duration(self, now: datetime) -> float | None:
        if self.created is None:
            return None
        return ((self.finished or now) - self.created).total_seconds()


def state_of(job: Json) -> tuple[str, str, str]:
    """The last condition that is True, with its reason and message (what `kubectl get` shows as STATE)."""
    conditions = (job.get("status") or {}).get("conditions") or []
    true = [c for c in conditions if isinstance(c, dict) and c.get("status") == "True"]
    if not true:
        return "Pending", "", ""
    last = true[-1]
    return str(last.get("type") or ""), str(last.get("reason") or ""), str(last.get("message") or "")


def _time(value: Any) -> datetime | None:
    return parse_timestamp(value) if isinstance(value, str) and is_timestamp(value) else None


def pod_restarts(pods: list[Json]) -> int:
    total = 0
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            count = status.get("restartCount") if isinstance(status, dict) else None
            total += count if isinstance(count, int) else 0
    return total


def summarize(job: Json, key: str, pods: list[Json] | None = None) -> Summary:
    meta = job.get("metadata") or {}
    status = job.get("status") or {}
    state, reason, message = state_of(job)
    replicas = []
    for rtype, counts in sorted((status.get("replicaStatuses") or {}).items()):
        counts = counts if isinstance(counts, dict) else {}
        replicas.append(
            (
                str(rtype),
                Replicas(
                    int(counts.get("active") or 0),
                    int(counts.get("succeeded") or 0),
                    int(counts.get("failed") or 0),
                ),
            )
        )
    labels = meta.get("labels") or {}
    finished = _time(status.get("completionTime"))
    if finished is None and state in ("Succeeded", "Failed"):
        finished = _time(_condition_time(job, state))
    return Summary(
        key=key,
        kind=str(job.get("kind") or ""),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        state=state,
        reason=reason,
        message=message,
        replicas=tuple(replicas),
        # Pods recreated after a failure (the sync's record), and the in-place restarts of the containers
        # of the pods at hand (a job's page, a local run; the cluster's list has no pods).
        restarts=len(status.get("podRestarts") or {}) + (pod_restarts(pods) if pods is not None else 0),
        created=_time(meta.get("creationTimestamp")) or _time(status.get("startTime")),
        finished=finished,
        queue=str(labels.get(QUEUE_LABEL) or ""),
        uid=str(meta.get("uid") or ""),
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        annotations=_kept_annotations(meta.get("annotations") or {}),
    )


def _kept_annotations(annotations: Json) -> tuple[tuple[str, str], ...]:
    keys = {key for ext in EXTENSIONS for key in ext.summary_annotations}
    return tuple(sorted((k, str(v)) for k, v in annotations.items() if k in keys and v))


def _condition_time(job: Json, kind: str) -> Any:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind and cond.get("status") == "True":
            return cond.get("lastTransitionTime")
    return None


@dataclass(frozen=True)
class Query:
    """What the list page was asked for; every field comes from the URL, so a filtered page is a link."""

    namespace: str = ""
    kind: str = ""
    state: str = ""
    text: str = ""
    sort: str = "created"
    descending: bool = True
    page: int = 1
    size: int = 50

    @classmethod
    def from_args(cls, args: Any) -> Query:
        sort = str(args.get("sort") or "created")
        size = _int(args.get("size"), 50)
        return cls(
            namespace=str(args.get("namespace") or ""),
            kind=str(args.get("kind") or ""),
            state=str(args.get("state") or ""),
            text=str(args.get("q") or "").strip(),
            sort=sort if sort in SORT_KEYS else "created",
            descending=str(args.get("order") or ("desc" if sort == "created" else "asc")) == "desc",
            page=max(_int(args.get("page"), 1), 1),
            size=size if size in PAGE_SIZES else 50,
        )

    def matches(self, s: Summary) -> bool:
        if self.namespace and s.namespace != self.namespace:
            return False
        if self.kind and s.kind != self.kind:
            return False
        if self.state and s.state != self.state:
            return False
        if self.text:
            haystack = " ".join((s.name, s.namespace, s.kind, s.state, s.reason, s.queue)).lower()
            return all(word in haystack for word in self.text.lower().split())
        return True


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class Page:
    rows: list[Summary]
    total: int  # rows that match the filters
    page: int
    pages: int


def _sort_key(sort: str, s: Summary) -> tuple[Any, ...]:
    # Ties are broken by the job's identity, so equal rows never swap places between two renders.
    identity = (s.namespace, s.kind, s.name, s.key)
    if sort == "created":
        return (s.created.timestamp() if s.created else 0.0, *identity)
    if sort == "state":
        return (s.state, *identity)
    if sort == "kind":
        return (s.kind, s.namespace, s.name, s.key)
    if sort == "namespace":
        return identity
    return (s.name, s.namespace, s.kind, s.key)


def select(summaries: list[Summary], query: Query) -> Page:
    """The page of matching rows the query asks for; a page past the end is the last page."""
    rows = sorted(
        (s for s in summaries if query.matches(s)),
        key=lambda s: _sort_key(query.sort, s),
        reverse=query.descending,
    )
    pages = max((len(rows) + query.size - 1) // query.size, 1)
    page = min(query.page, pages)
    start = (page - 1) * query.size
    return Page(rows[start : start + query.size], len(rows), page, pages)
