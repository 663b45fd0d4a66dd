"""The one registry of our extensions: every annotation under `trainop.dev/` that a job may carry.

Admission (trainop.admission.admit) calls `resolve` after Kubeflow's defaults: one pass over the
registry writes every applying extension's defaults into the job and returns a `Resolved` value, which
validation (after Kubeflow's checks) and every step of the sync read instead of the annotations, so the
webhooks, every sync and `trainop run` resolve and check them the same way. An annotation under the
prefix that no extension owns is refused with the list of known ones, so a misspelt key fails loudly
instead of silently doing nothing. The README's annotation table is rendered
from this registry (`python hack/annotations.py --write-readme`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from trainop.api.checks import Result
from trainop.api.kinds import ChildType
from trainop.extensions.accelerators import Accelerators
from trainop.extensions.base import (
    PREFIX,
    Addons,
    AnnotationDoc,
    Draft,
    Extension,
    JobState,
    ReplicaFailure,
    annotation_path,
)
from trainop.extensions.jsonlogs import JsonLogs
from trainop.extensions.parameterserver import DefaultServer
from trainop.extensions.placement import Placement
from trainop.extensions.tensorboard import TensorBoard
from trainop.job.context import JobContext
from trainop.job.mounts import Mounted
from trainop.jsontypes import Json

EXTENSIONS: Final[tuple[Extension, ...]] = (
    Accelerators(),
    Placement(),
    TensorBoard(),
    JsonLogs(),
    DefaultServer(),
)

README_BEGIN: Final = (
    "<!-- BEGIN annotations: generated from trainop.extensions (python hack/annotations.py) -->"
)
README_END: Final = "<!-- END annotations -->"


def ours(job: Json) -> dict[str, Any]:
    """The job's annotations under PREFIX, values as found (validation reports non-strings)."""
    meta = job.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict):
        return {}
    return {k: v for k, v in annotations.items() if isinstance(k, str) and k.startswith(PREFIX)}


@dataclass(frozen=True)
class Applied:
    """One extension that applies to a job, with its annotation values after defaulting."""

    extension: Extension
    values: Mapping[str, str]


@dataclass(frozen=True)
class Resolved:
    """Which extensions apply to one admitted job and with which values: resolved once, by admission,
    and read by every later step (validation, the sync's children, pods and failure messages)."""

    applied: tuple[Applied, ...] = ()
    # (field path, message) of each annotation of ours that no extension reads or whose value is not a
    # string, found while resolving.
    refused: tuple[tuple[str, str], ...] = ()

    def validate(self, draft: Draft, result: Result) -> None:
        """Append every problem with the job's `trainop.dev/` annotations to `result`."""
        for path, message in self.refused:
            result.error(path, message)
        for a in self.applied:
            a.extension.validate(draft, a.values, result)

    def children(self, ctx: JobContext, state: JobState) -> Addons:
        """Every applying extension's children of the job, and the soonest resync any of them asks for."""
        out: list[Json] = []
        resync: list[float] = []
        for a in self.applied:
            addons = a.extension.children(ctx, a.values, state)
            out += addons.children
            if addons.resync_after_seconds is not None:
                resync.append(addons.resync_after_seconds)
        return Addons(tuple(out), min(resync) if resync else None)

    def mounts(self, ctx: JobContext) -> tuple[Mounted, ...]:
        """Every applying extension's ConfigMap children whose content the pods run."""
        return tuple(m for a in self.applied for m in a.extension.mounts(ctx, a.values))

    def decorate_pod(self, ctx: JobContext, pod: Json) -> Json:
        """The desired pod with what every applying extension adds to it; `pod` itself when none does."""
        for a in self.applied:
            pod = a.extension.decorate_pod(ctx, a.values, pod)
        return pod

    def explain_failures(self, ctx: JobContext, failures: list[ReplicaFailure]) -> str:
        """What the applying extensions know of why these replicas failed, one sentence each ("" when
        none does), for the job's Failed condition message."""
        out = [
            s for a in self.applied for f in failures if (s := a.extension.explain_failure(ctx, a.values, f))
        ]
        return " ".join(out)


NONE: Final = Resolved()


def resolve(job: Json) -> tuple[Json, Resolved]:
    """The job with every applying extension's defaults written in, and what applies with which values:
    the registry's one pass over a job. The very same job object and NONE when nothing applies (no
    annotations of ours and no cluster default that adds some)."""
    found = ours(job)
    draft = Draft(job)
    applied: list[Applied] = []
    claimed: set[str] = set()
    for ext in EXTENSIONS:
        mine = {k: v for k, v in found.items() if ext.owns(k)}
        claimed |= mine.keys()
        values = {k: v for k, v in mine.items() if isinstance(v, str)}
        if not values and not ext.applies_without_annotations():
            continue
        draft = ext.default(draft, values)
        # Each extension owns its own keys, so what it owns among the written ones it wrote itself.
        applied.append(Applied(ext, {**values, **draft.written_by(ext.owns)}))
    if not applied and not found:
        return job, NONE
    refused = [
        (annotation_path(key), _refusal(key, value, key in claimed))
        for key, value in found.items()
        if key not in claimed or not isinstance(value, str)
    ]
    return draft.job, Resolved(tuple(applied), tuple(refused))


def _refusal(key: str, value: Any, owned: bool) -> str:
    if not owned:
        known = ", ".join(d.key for d in docs())
        return (
            f"Unsupported value: no trainop extension reads {key!r}; the known annotations are {known} (see "
            "the README's annotation table)"
        )
    return f"Invalid value: {value!r}: annotation values are strings"


def check_settings(environ: Mapping[str, str]) -> None:
    """Raise SettingError for the first malformed cluster setting of any extension (server start-up)."""
    for ext in EXTENSIONS:
        ext.check_settings(environ)


def child_types() -> tuple[ChildType, ...]:
    """The child types of every extension, once each, in registry order."""
    seen: list[ChildType] = []
    for ext in EXTENSIONS:
        seen += [t for t in ext.child_types if t not in seen]
    return tuple(seen)


def shipped_names(job_name: str) -> tuple[str, ...]:
    """The ConfigMap child names of every file any extension may ship to a job called `job_name`,
    whatever its annotations (the customize hook asks Metacontroller for same-named objects)."""
    return tuple(f.child_name(job_name) for ext in EXTENSIONS for f in ext.shipped)


def docs() -> list[AnnotationDoc]:
    return [doc for ext in EXTENSIONS for doc in ext.docs]


def readme_table() -> str:
    """The README block, markers included."""

    def cell(text: str) -> str:
        # `<` outside code spans would open an HTML tag; inside them an entity would show as written.
        parts = " ".join(text.split()).replace("|", "\\|").split("`")
        return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))

    lines = [
        README_BEGIN,
        "| Annotation | Value | What it does | Example |",
        "| --- | --- | --- | --- |",
    ]
    for doc in docs():
        example = doc.example.replace("|", "\\|")
        lines.append(f"| `{doc.key}` | {cell(doc.value)} | {cell(doc.effect)} | `{example}` |")
    lines.append(README_END)
    return "\n".join(lines)


def owned(ext: Extension, job: Json) -> dict[str, str]:
    """The job's annotations that `ext` owns, with string values: what its faces are given."""
    return {k: v for k, v in ours(job).items() if isinstance(v, str) and ext.owns(k)}
