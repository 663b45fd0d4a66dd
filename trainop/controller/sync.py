"""The sync hook as a pure function: a job and its observed children in; desired children and status out.

One chain of values: admit (who manages the job, defaults, validation) -> observe -> decide -> desire,
then the Events those imply. Everything the operator remembers lives in the returned status, so a
resync of an unchanged job returns byte-identical output and Metacontroller writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from trainop.admission.admit import admit
from trainop.api.jsonpath import dig
from trainop.api.jsonvalues import clean
from trainop.api.times import timestamp
from trainop.controller import events
from trainop.controller.decide import decide, decide_invalid
from trainop.controller.desire import desire, desire_invalid
from trainop.controller.observe import observe, previous_status
from trainop.job.event import Event
from trainop.job.observed import Children
from trainop.job.settings import Settings
from trainop.jsontypes import Json


@dataclass(frozen=True)
class SyncResult:
    status: Json
    children: list[Json]
    resync_after_seconds: float | None = None
    # ttlSecondsAfterFinished has expired: the caller deletes the job (a hook cannot delete its parent).
    delete_parent: bool = False
    # The Kubernetes Events this sync implies; the caller records them (hooks.recorder).
    events: tuple[Event, ...] = ()

    def response(self) -> Json:
        """The body Metacontroller expects from a sync hook."""
        out: Json = {"status": self.status, "children": self.children}
        if self.resync_after_seconds is not None:
            # A float field for Metacontroller, but whole numbers go out as ints like everything else.
            out["resyncAfterSeconds"] = clean(self.resync_after_seconds)
        return out


def sync(
    parent: Json, children: Children, settings: Settings, now: datetime, related: Children | None = None
) -> SyncResult:
    """Compute the desired children and status of one job (any of the seven kinds). `related` is what
    Metacontroller found for the customize hook's rules (trainop.controller.related)."""
    admission = admit(parent)
    if admission.managed_elsewhere:
        # Another controller (MultiKueue) owns this job: touch nothing.
        return SyncResult(
            status=previous_status(parent),
            children=[o for group in children.values() for o in group.values()],
        )
    if not admission.checks.ok:
        return _invalid(admission.job, previous_status(parent), admission.checks.message, now)
    obs = observe(admission.job, admission.extensions, parent, children, settings, now, related)
    decision = decide(obs)
    desired = desire(obs, decision)
    return SyncResult(
        status=decision.status,
        children=desired.children,
        resync_after_seconds=desired.resync_after_seconds,
        delete_parent=desired.delete_parent,
        events=tuple(events.derive(obs, decision, desired.children)),
    )


def _invalid(job: Json, previous: Json, message: str, now: datetime) -> SyncResult:
    """A job that bypassed validation: Failed with the webhook's message, no children, its TTL kept."""
    kind = str(job["kind"])
    decision = decide_invalid(kind, previous, message, timestamp(now))
    desired = desire_invalid(dig(job, "spec", "runPolicy"), decision, now)
    implied = (events.invalid(kind, message),) if decision.failure is not None else ()
    return SyncResult(
        status=decision.status,
        children=desired.children,
        resync_after_seconds=desired.resync_after_seconds,
        delete_parent=desired.delete_parent,
        events=implied,
    )
