"""Recording the Events a sync implies (trainop.controller.events) without slowing or failing the sync.

The sync handler only hands a batch to a bounded queue; one background thread per process writes it.
Before writing, the thread reads the job from the apiserver and records nothing unless a job of that
name with that uid exists: the body of a /sync call is only a claim, and events are written with the
hook's own credentials. A job its ttlSecondsAfterFinished deleted is gone before a busy writer (in any
worker process) reaches its last batches; the hook that deletes it first records Kubeflow's "Deleted
job" event, after its own read proved the job real, and that event is the proof the writers accept
for a job that no longer exists.

Each event has a deterministic name, so a sync Metacontroller retries POSTs the same object and gets
409 AlreadyExists. The event's annotation says which occurrence it last recorded: the same one means a
retry (nothing to do); another one is a genuine repeat, recorded as Kubernetes aggregates events, by
bumping `count` and `lastTimestamp` on the existing object. A per-process cache of what was recorded
keeps steady-state syncs (which imply no events at all) and retries free of API calls.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from trainop.controller.events import deleted_job
from trainop.frameworks import framework, kind_info
from trainop.job.event import Event

log = logging.getLogger("trainop.hooks")
Json = dict[str, Any]
OCCURRENCE = "trainop/occurrence"
# client-go's spam filter, which Kubeflow's recorders use: per job and event type a bucket of 25
# events refilled at one per five minutes. It bounds the writes a big job costs the apiserver.
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
# Kubernetes serialises event times with microseconds for eventTime and whole seconds elsewhere.
SECONDS = "%Y-%m-%dT%H:%M:%SZ"
PATCH_ATTEMPTS = 3


class EventApi(Protocol):
    def get_job(self, kind: str, namespace: str, name: str) -> Json | None: ...

    def create_event(self, namespace: str, event: Json) -> bool: ...

    def get_event(self, namespace: str, name: str) -> Json | None: ...

    def patch_event(self, namespace: str, name: str, patch: Json) -> bool: ...


@dataclass(frozen=True)
class Batch:
    kind: str
    namespace: str
    name: str
    uid: str
    events: tuple[Event, ...]


def event_object(job: Json, event: Event, now: datetime) -> Json:
    """A core/v1 Event as client-go's recorder makes it for Kubeflow's controllers."""
    meta = job["metadata"]
    info = kind_info(str(job["kind"]))
    stamp = now.astimezone(UTC).strftime(SECONDS)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event.name(str(meta["name"]), str(meta["uid"])),
            "namespace": meta["namespace"],
            "annotations": {OCCURRENCE: event.occurrence},
        },
        "involvedObject": {
            "apiVersion": str(job.get("apiVersion") or "kubeflow.org/v1"),
            "kind": info.kind,
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": event.reason,
        "message": event.message,
        "type": event.type,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": info.controller_name},
        "reportingComponent": info.controller_name,
        "reportingInstance": "",
    }


class Recorder:
    """Queue batches from request threads; write them from one daemon thread per process."""

    def __init__(
        self,
        api: EventApi,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_batches: int = 1000,
        cache_size: int = 8192,
    ) -> None:
        self.api = api
        self.clock = clock
        self.queue: queue.Queue[Batch] = queue.Queue(maxsize=max_batches)
        self.cache_size = cache_size
        # event name -> the occurrence this process last saw recorded under it
        self.recorded: OrderedDict[str, str] = OrderedDict()
        # (job uid, event type) -> (tokens left, when counted); only the writer thread touches it
        self.buckets: OrderedDict[tuple[str, str], tuple[float, datetime]] = OrderedDict()
        self.lock = threading.Lock()
        self._thread_pid: int | None = None

    # ---- request threads --------------------------------------------------------------------------
    def submit(self, parent: Json, events: Sequence[Event]) -> None:
        """Queue what is not known to be recorded already; never blocks, never raises."""
        try:
            meta = parent["metadata"]
            namespace, name, uid = meta.get("namespace") or "default", str(meta["name"]), str(meta["uid"])
            fresh = tuple(e for e in events if not self._known(e.name(name, uid), e.occurrence))
            if not fresh:
                return
            self._ensure_thread()
            self.queue.put_nowait(Batch(str(parent["kind"]), namespace, name, uid, fresh))
        except queue.Full:
            log.warning(json.dumps({"event": "events-dropped", "reason": "queue full", "count": len(events)}))
        except Exception:
            log.exception("queueing events failed")

    def _known(self, name: str, occurrence: str) -> bool:
        with self.lock:
            return self.recorded.get(name) == occurrence

    def _remember(self, name: str, occurrence: str) -> None:
        with self.lock:
            self.recorded[name] = occurrence
            self.recorded.move_to_end(name)
            while len(self.recorded) > self.cache_size:
                self.recorded.popitem(last=False)

    def _ensure_thread(self) -> None:
        # gunicorn forks workers after importing the app: each process needs its own thread.
        with self.lock:
            if self._thread_pid == os.getpid():
                return
            self._thread_pid = os.getpid()
        threading.Thread(target=self._run, name="trainop-events", daemon=True).start()

    # ---- the writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            batch = self.queue.get()
            try:
                self.write(batch)
            except Exception:
                log.exception("recording events for %s/%s failed", batch.namespace, batch.name)
            finally:
                self.queue.task_done()

    def write(self, batch: Batch) -> None:
        """Record one batch: one GET of the job, then one request per event not yet recorded."""
        job = self.api.get_job(batch.kind, batch.namespace, batch.name)
        if job is None:
            job = self._deleted_by_ttl(batch)
        if job is None or (job.get("metadata") or {}).get("uid") != batch.uid:
            entry = {"event": "events-skipped", "namespace": batch.namespace, "name": batch.name}
            log.warning(json.dumps({**entry, "reason": "no job with the request's uid on the apiserver"}))
            return
        for event in batch.events:
            if event.about_child and not self._take_token(batch.uid, event.type):
                entry = {"event": "event-rate-limited", "name": batch.name, "reason": event.reason}
                log.info(json.dumps({**entry, "namespace": batch.namespace}))
                continue
            try:
                self._record(job, event)
            except Exception:
                log.exception("recording %s for %s/%s failed", event.reason, batch.namespace, batch.name)

    def _deleted_by_ttl(self, batch: Batch) -> Json | None:
        """The job as its events name it if a TTL deletion recorded deleting it (see record_deletion)."""
        name = deleted_job(framework(batch.kind), batch.name).name(batch.name, batch.uid)
        marker = self.api.get_event(batch.namespace, name)
        if marker is None or (marker.get("involvedObject") or {}).get("uid") != batch.uid:
            return None
        meta = {"name": batch.name, "namespace": batch.namespace, "uid": batch.uid}
        return {"apiVersion": "kubeflow.org/v1", "kind": batch.kind, "metadata": meta}

    def record_deletion(self, job: Json) -> None:
        """Record Kubeflow's "Deleted job" event for `job` (the apiserver's copy, past its TTL) now, from
        the request thread and before the delete, so that every writer finding the job gone afterwards
        can tell it was real. Never raises: a failure only costs those last events."""
        meta = job["metadata"]
        try:
            self._record(job, deleted_job(framework(str(job["kind"])), str(meta["name"])))
        except Exception:
            log.exception("recording the deletion of %s/%s failed", meta.get("namespace"), meta["name"])

    def _take_token(self, uid: str, event_type: str) -> bool:
        now = self.clock()
        tokens, since = self.buckets.get((uid, event_type), (float(SPAM_BURST), now))
        tokens = min(float(SPAM_BURST), tokens + (now - since).total_seconds() / SPAM_REFILL_SECONDS)
        allowed = tokens >= 1
        self.buckets[(uid, event_type)] = (tokens - 1 if allowed else tokens, now)
        self.buckets.move_to_end((uid, event_type))
        while len(self.buckets) > self.cache_size:
            self.buckets.popitem(last=False)
        return allowed

    def _record(self, job: Json, event: Event) -> None:
        body = event_object(job, event, self.clock())
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if self._known(name, event.occurrence):
            return
        if self.api.create_event(namespace, body):
            self._remember(name, event.occurrence)
            return
        for _ in range(PATCH_ATTEMPTS):
            existing = self.api.get_event(namespace, name)
            if existing is None:
                if self.api.create_event(namespace, body):
                    break
                continue
            meta = existing.get("metadata") or {}
            if (meta.get("annotations") or {}).get(OCCURRENCE) == event.occurrence:
                break  # a retried sync: this occurrence is recorded already
            patch = {
                "metadata": {
                    "resourceVersion": meta.get("resourceVersion"),
                    "annotations": {OCCURRENCE: event.occurrence},
                },
                "count": int(existing.get("count") or 1) + 1,
                "lastTimestamp": body["lastTimestamp"],
            }
            if self.api.patch_event(namespace, name, patch):
                break
        else:
            log.warning(json.dumps({"event": "event-not-aggregated", "name": name, "reason": event.reason}))
            return
        self._remember(name, event.occurrence)

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until every queued batch is written (tests and shutdown); False on timeout."""
        done = threading.Event()

        def wait() -> None:
            self.queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        return done.wait(timeout)
