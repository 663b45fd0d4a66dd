"""What the pages read and do, whatever serves the jobs: a cluster (cluster.py) or local runs (runs.py).

Every call names the user it is made for; a cluster source makes it as that user, so the cluster's RBAC,
not the UI, decides what each user sees and may do.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from trainop.jsontypes import Json
from trainop.ui.scheduling import Gate
from trainop.ui.summary import Summary


@dataclass(frozen=True)
class User:
    name: str = ""  # "" when the UI has no authentication (local use)
    groups: tuple[str, ...] = ()
    token: str = ""  # the user's own bearer token, when that is how they signed in
    # Groups the proxy named that the UI does not impersonate (not in its --impersonate-groups), shown
    # on every page so the user knows their access does not come from them.
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class EventRow:
    """A Kubernetes Event (or a local run's event) as a row of a job's page."""

    time: str
    type: str  # Normal or Warning
    reason: str
    message: str
    object: str = ""  # the object it is about: `<Kind>/<name>`
    count: int = 1


@dataclass(frozen=True)
class Container:
    pod: str
    name: str


@dataclass
class Detail:
    summary: Summary
    job: Json
    pods: list[Json]
    events: list[EventRow]
    containers: list[Container]  # whose logs can be read, in pod order
    live: bool  # whether it can still change (logs followed, the page updated)
    notes: list[str] = field(default_factory=list)  # what a reader should know about where this came from
    # While it waits to be scheduled: its PodGroup and Kueue Workload, where there are such.
    scheduling: list[Gate] = field(default_factory=list)


class NotAllowed(Exception):
    """The user may not do this (the cluster answered 403, or the UI is read-only)."""


class Invalid(Exception):
    """What was sent cannot be applied; `errors` are (field path, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{p}: {m}" if p else m for p, m in errors))
        self.errors = errors


class BadKey(Invalid):
    """The address names no job: a part is empty or malformed (shown as a 404 with what is wrong)."""


class Source(Protocol):
    # Which actions apply to jobs of this source, in the order the page offers them.
    actions: tuple[str, ...]
    # What a created job becomes: "created" on a cluster, "started" for a local run.
    creates: str
    # Whether a job's annotations alone make what an extension links to exist (its TensorBoard): on a
    # cluster the sync serves the extensions' children; `trainop run` starts only what it was asked to
    # and records it (Summary.served).
    serves_addons: bool

    def summaries(self, user: User) -> list[Summary]: ...

    def detail(self, user: User, key: str) -> Detail | None: ...

    def details(self, user: User, key: str, poll: float) -> Generator[Detail | None]:
        """The job's page as read now, then again about every `poll` seconds; None (and the end) once
        the job is gone or the user may no longer see it. Every stream of one job shares the reads, so
        the caller must close the iterator when its client goes."""
        ...

    def read_logs(
        self, user: User, key: str, detail: Detail, container: Container | None, tail: int
    ) -> list[str]:
        """At most the last `tail` lines (of the page's containers with their prefixes when `container` is
        None), read once: what a page shows, holding nothing open after it."""
        ...

    def follow_logs(
        self, user: User, key: str, detail: Detail, container: Container | None, tail: int
    ) -> Generator[list[str]]:
        """The last `tail` lines (as `read_logs`), then the new ones as they come; yields an empty batch
        at least every few seconds while nothing comes, so the caller notices a closed client; ends when
        the job can no longer log. Closing the iterator stops every read it holds open."""
        ...

    def may(self, user: User, key: str, action: str) -> bool:
        """Whether the user may do `action` (one of `actions`, or "create" of the job `key` names) as far as
        the source can tell beforehand: a page offers only these (the write itself is still judged where
        it is made)."""
        ...

    def act(self, user: User, key: str, action: str) -> str:
        """Do `action` (one of `actions`) to the job; returns what happened, for the page."""
        ...

    def create(self, user: User, job: Json, dry_run: bool, companions: Sequence[Json] = ()) -> str:
        """Create the job (or only check that it would be, with `dry_run`), with the ConfigMaps it mounts
        (`companions`, in its namespace) applied first; raises Invalid or NotAllowed."""
        ...
