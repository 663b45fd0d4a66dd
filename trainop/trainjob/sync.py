"""One sync of a TrainJob: its children and status from what was observed, as Trainer's controller decides.

Observe → decide → desire, with every input passed in (docs/trainer-v2.md#a-sync):

- the runtime is the job's **snapshot** (a ConfigMap child holding the runtime as first read) when there
  is a valid one, else the runtime itself (Metacontroller's related resource), which the snapshot then
  freezes: a runtime edited later does not change a job that already started;
- the **JobSet** is built only while it may change: never for a finished job, and never while both the
  job and the observed JobSet run (JobSet refuses template changes then); otherwise it stays as applied;
- the **status** follows Trainer's order: a stale Failed goes (unless the deadline set it), a runtime of
  another API is Failed at once, Suspended/Resumed follow `spec.suspend`, Complete/Failed and
  `jobsStatus` come from the JobSet, and `activeDeadlineSeconds` fails the job and drops its JobSet.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import yaml
from pydantic import ValidationError

from trainop.api.times import is_timestamp, parse_timestamp, timestamp
from trainop.controller.desire import as_desired
from trainop.job.event import WARNING, Event
from trainop.jsontypes import Json
from trainop.trainjob import conditions as cond
from trainop.trainjob import constants as c
from trainop.trainjob.build import desired_jobset
from trainop.trainjob.models import TrainJobSpec
from trainop.trainjob.shapes import mapping

RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
SNAPSHOT_SUFFIX = "-runtime-snapshot"
SNAPSHOT_KEY = "runtime"
CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
COMPLETE, FAILED, SUSPENDED = "Complete", "Failed", "Suspended"
DEADLINE_EXCEEDED = "DeadlineExceeded"
# Cut so the whole Event message stays under the 1 KiB events.k8s.io allows, as Trainer does.
MAX_ERROR = 950


@dataclass(frozen=True)
class Observed:
    """What Metacontroller sent: the job, its runtime (None if missing) and its children."""

    job: Json
    runtime: Json | None
    jobset: Json | None = None
    snapshot: Json | None = None


@dataclass(frozen=True)
class Outcome:
    status: Json
    children: list[Json] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # Seconds until the deadline, for Metacontroller's resyncAfterSeconds.
    resync_after: float | None = None


def sync(observed: Observed, now: datetime) -> Outcome:
    job = observed.job
    spec = mapping(job.get("spec"))
    status = _sane_status(job.get("status"))
    kept = [as_desired(child) for child in (observed.snapshot, observed.jobset) if child is not None]
    if spec.get("managedBy") not in (None, CONTROLLER):
        # Another controller (MultiKueue) owns this job: nothing here may change it.
        return Outcome(status=status, children=kept)
    try:
        TrainJobSpec.model_validate(spec)
    except ValidationError as e:
        # Only a forged request gets here (the CRD checks the spec): nothing is built from it.
        return Outcome(
            status=status, children=kept, events=[_creation_failed(f"spec: {e.errors()[0]['msg']}")]
        )

    stamp = timestamp(now)
    conditions: list[Json] = list(status.get("conditions") or [])
    failed = cond.find(conditions, FAILED)
    if failed is not None and failed.get("reason") != DEADLINE_EXCEEDED:
        conditions = cond.without(conditions, FAILED)

    children, events = kept, []
    ref = mapping(spec.get("runtimeRef"))
    if not _supported(ref):
        gk = ".".join(p for p in (str(ref.get("kind") or ""), str(ref.get("apiGroup") or "")) if p)
        failure = {"type": FAILED, "status": "True", "reason": "TrainingRuntimeNotSupported",
                   "message": f"unsupported runtime: {gk}"}  # fmt: skip
        conditions = cond.set_condition(conditions, failure, stamp)
    elif not _finished(conditions):
        try:
            children = _children(observed)
        except ValueError as e:  # UnsupportedRuntime and every unbuildable input
            events = [_creation_failed(str(e))]

    conditions = _suspension(conditions, spec, stamp)
    conditions = _from_jobset(conditions, observed.jobset, stamp)
    if observed.jobset is not None:
        status.pop("jobsStatus", None)
        status.update(_jobs_status(observed.jobset))
    conditions, resync_after = _deadline(job, conditions, now)
    failed = cond.find(conditions, FAILED)
    if failed is not None and failed.get("status") == "True" and failed.get("reason") == DEADLINE_EXCEEDED:
        # Past its deadline a job keeps nothing running.
        children = [child for child in children if child.get("kind") != "JobSet"]
    status.pop("conditions", None)
    if conditions:
        status["conditions"] = conditions
    return Outcome(status=status, children=children, events=events, resync_after=resync_after)


def _sane_status(value: object) -> Json:
    """The status fields the sync writes, of the shape it writes them; another writer's rest is dropped."""
    status = mapping(value)
    out: Json = {}
    listed = status.get("conditions")
    conditions = [
        copy.deepcopy(c)
        for c in (listed if isinstance(listed, list) else [])
        if isinstance(c, dict) and isinstance(c.get("type"), str) and isinstance(c.get("status"), str)
    ]
    if conditions:
        out["conditions"] = conditions
    if isinstance(status.get("jobsStatus"), list):
        out["jobsStatus"] = copy.deepcopy(status["jobsStatus"])
    return out


def _supported(ref: Json) -> bool:
    return ref.get("apiGroup") == c.GROUP and ref.get("kind") in RUNTIME_KINDS


def _finished(conditions: list[Json]) -> bool:
    return cond.is_true(conditions, COMPLETE) or cond.is_true(conditions, FAILED)


def _creation_failed(error: str) -> Event:
    message = f"TrainJob resources reconciliation failed: {error[:MAX_ERROR]}"
    if len(error) > MAX_ERROR:
        message += " ..."
    return Event(WARNING, "TrainJobResourcesCreationFailed", message, occurrence=error, about_child=False)


# ---- children ---------------------------------------------------------------------------------------


def snapshot_runtime(job: Json, snapshot: Json | None) -> Json | None:
    """The runtime frozen in the job's snapshot ConfigMap; None when there is none.

    Raises ValueError, naming what is wrong, for a snapshot of another job or of another runtime.
    """
    if snapshot is None:
        return None
    owners = mapping(snapshot.get("metadata")).get("ownerReferences")
    uid = job["metadata"].get("uid")
    owned = isinstance(owners, list) and any(
        isinstance(o, dict) and o.get("controller") is True and o.get("uid") == uid for o in owners
    )
    if not owned:
        raise ValueError(
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
        )
    text = mapping(snapshot.get("data")).get(SNAPSHOT_KEY)
    if not isinstance(text, str):
        raise ValueError(f"invalid runtime snapshot: snapshot ConfigMap missing {SNAPSHOT_KEY!r} data key")
    try:
        runtime = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError(f"invalid runtime snapshot: unable to unmarshal the snapshot: {e}") from None
    if not isinstance(runtime, dict):
        raise ValueError("invalid runtime snapshot: unable to unmarshal the snapshot: not an object")
    ref = mapping(job["spec"].get("runtimeRef"))
    api_version = str(runtime.get("apiVersion") or "")
    found = (
        str(mapping(runtime.get("metadata")).get("name")),
        api_version.split("/")[0],
        runtime.get("kind"),
    )
    if found != (ref.get("name"), ref.get("apiGroup"), ref.get("kind")):
        raise ValueError(
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: expecting "
            f"{ref.get('name')!r}, {ref.get('apiGroup')!r}, {ref.get('kind')!r} but found "
            f"{found[0]!r}, {found[1]!r}, {found[2]!r}"
        )
    return runtime


def snapshot_of(job: Json, runtime: Json) -> Json:
    """The ConfigMap that freezes ``runtime`` for ``job`` (Metacontroller sets the owner reference)."""
    frozen = {k: v for k, v in runtime.items() if k != "status"}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": job["metadata"]["name"] + SNAPSHOT_SUFFIX,
            "namespace": job["metadata"].get("namespace"),
        },
        "data": {SNAPSHOT_KEY: yaml.safe_dump(frozen, sort_keys=True)},
    }


def _children(observed: Observed) -> list[Json]:
    job = observed.job
    frozen = snapshot_runtime(job, observed.snapshot)
    runtime = frozen if frozen is not None else observed.runtime
    if runtime is None:
        ref = mapping(job["spec"].get("runtimeRef"))
        raise ValueError(f"{ref.get('kind')} {ref.get('name')!r} not found: create the runtime first")
    snapshot = as_desired(observed.snapshot) if observed.snapshot is not None else snapshot_of(job, runtime)
    jobset = observed.jobset
    suspended = bool(job["spec"].get("suspend"))
    if jobset is not None and not suspended and not mapping(jobset.get("spec")).get("suspend"):
        return [snapshot, as_desired(jobset)]
    return [snapshot, desired_jobset(job, runtime)]


# ---- status -----------------------------------------------------------------------------------------


def _suspension(conditions: list[Json], spec: Json, stamp: str) -> list[Json]:
    if spec.get("suspend"):
        new = {"type": SUSPENDED, "status": "True", "reason": "Suspended", "message": "TrainJob is suspended"}
    elif cond.is_true(conditions, SUSPENDED):
        new = {"type": SUSPENDED, "status": "False", "reason": "Resumed", "message": "TrainJob is resumed"}
    else:
        return conditions
    return cond.set_condition(conditions, new, stamp)


def _from_jobset(conditions: list[Json], jobset: Json | None, stamp: str) -> list[Json]:
    js_conditions = mapping(mapping(jobset).get("status")).get("conditions")
    sane = [c for c in js_conditions if isinstance(c, dict)] if isinstance(js_conditions, list) else []
    for js_type, ours in (("Completed", COMPLETE), ("Failed", FAILED)):
        found = cond.find(sane, js_type)
        if found is not None and found.get("status") == "True":
            copied = {k: v for k, v in found.items() if isinstance(v, str) or k == "observedGeneration"}
            conditions = cond.set_condition(conditions, {**copied, "type": ours}, stamp)
    return conditions


def _jobs_status(jobset: Json) -> Json:
    """``jobsStatus``: one entry per replicatedJob, copied from the JobSet; none when it reports none."""
    counts = ("ready", "succeeded", "failed", "active", "suspended")
    reported = mapping(jobset.get("status")).get("replicatedJobsStatus")
    jobs = [
        {"name": r.get("name"), **{k: _count(r.get(k)) for k in counts}}
        for r in (reported if isinstance(reported, list) else [])
        if isinstance(r, dict) and isinstance(r.get("name"), str)
    ]
    return {"jobsStatus": jobs} if jobs else {}


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _deadline(job: Json, conditions: list[Json], now: datetime) -> tuple[list[Json], float | None]:
    spec = job.get("spec") or {}
    seconds = spec.get("activeDeadlineSeconds")
    if not seconds or _finished(conditions) or spec.get("suspend"):
        return conditions, None
    started = (job.get("metadata") or {}).get("creationTimestamp")
    resumed = cond.find(conditions, SUSPENDED)
    if resumed is not None and resumed.get("status") == "False":
        started = resumed.get("lastTransitionTime")
    if not isinstance(started, str) or not is_timestamp(started):
        return conditions, None
    try:
        deadline = parse_timestamp(started) + timedelta(seconds=int(seconds))
    except OverflowError:
        return conditions, None  # past the calendar's end: never
    if now > deadline:
        failure = {"type": FAILED, "status": "True", "reason": DEADLINE_EXCEEDED,
                   "message": "TrainJob exceeded its active deadline"}  # fmt: skip
        return cond.set_condition(conditions, failure, timestamp(now)), None
    return conditions, max((deadline - now).total_seconds(), 1.0)
