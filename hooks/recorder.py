"""Recording the Events a sync implies (trainop.controller.events) without slowing or failing the sync.

The sync handler only hands a batch to a bounded queue; one background thread per process writes it.
The body of a /sync call is only a claim, and events are written with the hook's own credentials, so
the thread writes only what the apiserver's copy of the job justifies (docs/limits.md#events-and-metrics):

* it reads the job and records nothing unless a job of that name with that uid exists and its spec is
  the one the sync computed from (a forged replica type, or a spec the caller made up, writes nothing);
  when the spec changed since (a job suspended and resumed before the writer got to the batch), the
  job as it was at the request's resourceVersion, read from the apiserver's history, must have that
  spec: what the sync saw was real then, so its Events are true;
* a validation failure is recorded only if the apiserver's copy fails validation with the same message;
* every event is bounded (trainop.job.event) and rate-limited: per job like client-go's spam filter,
  and per process, so no caller can write faster than SPAM_* and PROCESS_* allow;
* the batch's metric transitions are counted (hooks.metrics.count_confirmed) only past the same checks.

A job its ttlSecondsAfterFinished deleted is gone before a busy writer (in any worker process) reaches
its last batches; the hook that deletes it first records Kubeflow's "Deleted job" event, after its own
read proved the job real, and that event is the proof the writers accept for a job that no longer
exists (its spec can no longer be compared).

Each event has a deterministic name, so a sync Metacontroller retries POSTs the same object and gets
409 AlreadyExists. The event's annotation says which occurrence it last recorded: the same one means a
retry (nothing to do); another one is a genuine repeat, recorded as Kubernetes aggregates events, by
bumping `count` and `lastTimestamp` on the existing object. A per-process cache of what was recorded
keeps steady-state syncs (which imply no events at all) and retries free of API calls.
"""

from __future__ import annotations

import hashlib
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

import orjson

from hooks import metrics
from hooks.ratelimit import Buckets
from trainop.admission.admit import admit
from trainop.controller.events import deleted_job, invalid
from trainop.frameworks import framework, kind_info
from trainop.job.event import Event
from trainop.jsontypes import Json

log = logging.getLogger("trainop.hooks")
OCCURRENCE = "trainop/occurrence"
# client-go's spam filter, which Kubeflow's recorders use: a bucket of 25 events refilled at one per
# five minutes. Events about children have one per job and event type, the job's own transitions one
# per job, so a big job's pod events never crowd out its Succeeded.
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
# Every event this process writes, whatever the job: 500 at once, then 10 a second. With the
# apiserver's default --event-ttl of 1 h that keeps at most ~36,500 live Events per hook process, each
# under ~2 KiB (messages are cut at 1 KiB). Kubeflow's one controller writes at most its client's
# 20 requests a second in all.
PROCESS_BURST = 500
PROCESS_REFILL_SECONDS = 0.1
# Kubernetes serialises event times with microseconds for eventTime and whole seconds elsewhere.
SECONDS = "%Y-%m-%dT%H:%M:%SZ"
PATCH_ATTEMPTS = 3


class EventApi(Protocol):
    def get_job(self, kind: str, namespace: str, name: str) -> Json | None: ...

    def get_job_at(self, kind: str, namespace: str, name: str, revision: str) -> Json | None: ...

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
    # hooks.metrics.transitions of the same sync
    transitions: tuple[tuple[str, ...], ...] = ()
    # spec_digest of the job as the sync saw it
    spec: str = ""
    # the job's resourceVersion in the request
    revision: str = ""


def spec_digest(job: Json) -> str:
    """A digest of the job's spec as the apiserver serialises it (key order aside)."""
    return hashlib.sha256(orjson.dumps(job.get("spec"), option=orjson.OPT_SORT_KEYS)).hexdigest()


def _log(event: str, batch: Batch, **fields: Any) -> None:
    entry = {"event": event, "kind": batch.kind, "namespace": batch.namespace, "name": batch.name}
    log.warning(json.dumps({**entry, **fields}))


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
        # per job: (uid, event type) for events about children, (uid, "job") for the job's own
        self.buckets = Buckets(SPAM_BURST, SPAM_REFILL_SECONDS, cache_size)
        self.process = Buckets(PROCESS_BURST, PROCESS_REFILL_SECONDS, 1)
        self.lock = threading.Lock()
        self._thread_pid: int | None = None

    # ---- request threads --------------------------------------------------------------------------
    def submit(
        self, parent: Json, events: Sequence[Event], transitions: tuple[tuple[str, ...], ...] = ()
    ) -> None:
        """Queue what is not known to be recorded already; never blocks, never raises."""
        try:
            meta = parent["metadata"]
            namespace, name, uid = meta.get("namespace") or "default", str(meta["name"]), str(meta["uid"])
            fresh = tuple(e for e in events if not self._known(e.name(name, uid), e.occurrence))
            if not fresh and not transitions:
                return
            self._ensure_thread()
            revision = str(meta.get("resourceVersion") or "")
            batch = Batch(
                str(parent["kind"]), namespace, name, uid, fresh, transitions, spec_digest(parent), revision
            )
            self.queue.put_nowait(batch)
        except queue.Full:
            log.warning(json.dumps({"event": "events-dropped", "reason": "queue full", "count": len(events)}))
            metrics.record_dropped_events("queue-full", len(events))
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
        deleted = False
        if job is None:
            job, deleted = self._deleted_by_ttl(batch), True
        if job is None or (job.get("metadata") or {}).get("uid") != batch.uid:
            _log("events-skipped", batch, reason="no job with the request's uid on the apiserver")
            metrics.record_dropped_events("no-such-job", len(batch.events))
            return
        if not deleted and spec_digest(job) != batch.spec:
            then = self._as_it_was(batch)
            if then is None:
                _log("events-skipped", batch, reason="the request's spec is not the apiserver's, now or then")
                metrics.record_dropped_events("spec-differs", len(batch.events))
                return
            job = then
        metrics.count_confirmed(job, batch.transitions)
        for event in batch.events:
            if event.validation and not self._fails_validation(job, event):
                _log("event-skipped", batch, reason="the apiserver's copy does not fail validation so")
                metrics.record_dropped_events("not-justified")
                continue
            if not self._allowed(batch.uid, event):
                continue
            try:
                self._record(job, event)
            except Exception:
                log.exception("recording %s for %s/%s failed", event.reason, batch.namespace, batch.name)

    def _as_it_was(self, batch: Batch) -> Json | None:
        """The job at the request's resourceVersion, if it had the request's uid and spec then."""
        if not batch.revision:
            return None
        then = self.api.get_job_at(batch.kind, batch.namespace, batch.name, batch.revision)
        if then is None or (then.get("metadata") or {}).get("uid") != batch.uid:
            return None
        return then if spec_digest(then) == batch.spec else None

    @staticmethod
    def _fails_validation(job: Json, event: Event) -> bool:
        """Whether validating `job` (the apiserver's copy) implies `event`, message and all."""
        admission = admit(job)
        if admission.managed_elsewhere or admission.checks.ok:
            return False
        return invalid(str(job["kind"]), admission.checks.message) == event

    def _allowed(self, uid: str, event: Event) -> bool:
        """Take a token for `event` from its job's bucket, then from the process's; log a refusal."""
        now = self.clock()
        key = (uid, event.type) if event.about_child else (uid, "job")
        if not self.buckets.take(key, now):
            reason = "job-limit"
        elif not self.process.take(None, now):
            reason = "process-limit"
        else:
            return True
        log.info(
            json.dumps({"event": "event-rate-limited", "uid": uid, "reason": event.reason, "by": reason})
        )
        metrics.record_dropped_events(reason)
        return False

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
        event = deleted_job(framework(str(job["kind"])), str(meta["name"]))
        try:
            if self._allowed(str(meta["uid"]), event):
                self._record(job, event)
        except Exception:
            log.exception("recording the deletion of %s/%s failed", meta.get("namespace"), meta["name"])

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
