"""The one registry of our extensions: every annotation under `trainop.dev/` that a job may carry.

Admission (trainop.admission.admit) applies `apply_defaults` after Kubeflow's defaults and `validate`
after Kubeflow's checks, so the webhooks, every sync and `trainop run` resolve and check them the same
way. An annotation under the prefix that no extension owns is refused with the list of known ones, so a
misspelt key fails loudly instead of silently doing nothing. The README's annotation table is rendered
from this registry (`python hack/annotations.py --write-readme`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from trainop.api.checks import Result
from trainop.api.kinds import ChildType
from trainop.extensions.accelerators import Accelerators
from trainop.extensions.base import (
    PREFIX,
    Addons,
    AnnotationDoc,
    Extension,
    JobState,
    ReplicaFailure,
    annotation_path,
)
from trainop.extensions.jsonlogs import JsonLogs
from trainop.extensions.parameterserver import DefaultServer
from trainop.extensions.placement import Placement
from trainop.extensions.tensorboard import TensorBoard
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


def _owned(ext: Extension, found: Mapping[str, Any]) -> dict[str, str]:
    return {k: v for k, v in found.items() if isinstance(v, str) and ext.owns(k)}


def _applies(ext: Extension, values: Mapping[str, str]) -> bool:
    return bool(values) or ext.applies_without_annotations()


def apply_defaults(job: Json) -> Json:
    """The job with every extension's annotations resolved into it; the very same object when none
    applies (no annotations of ours and no cluster default that adds some)."""
    found = ours(job)
    for ext in EXTENSIONS:
        values = _owned(ext, found)
        if _applies(ext, values):
            job = ext.default(job, values)
    return job


def validate(job: Json, result: Result) -> None:
    """Append every problem with the job's `trainop.dev/` annotations to `result`."""
    found = ours(job)
    for key, value in found.items():
        if not any(ext.owns(key) for ext in EXTENSIONS):
            result.error(
                annotation_path(key),
                f"Unsupported value: no trainop extension reads {key!r}; the known annotations are "
                f"{', '.join(d.key for d in docs())} (see the README's annotation table)",
            )
        elif not isinstance(value, str):
            result.error(annotation_path(key), f"Invalid value: {value!r}: annotation values are strings")
    for ext in EXTENSIONS:
        values = _owned(ext, found)
        if _applies(ext, values):
            ext.validate(job, values, result)


def children(job: Json, state: JobState) -> Addons:
    """Every extension's children of the admitted job, and the soonest resync any of them asks for."""
    found = ours(job)
    out: list[Json] = []
    resync: list[float] = []
    for ext in EXTENSIONS:
        values = _owned(ext, found)
        if not _applies(ext, values):
            continue
        addons = ext.children(job, values, state)
        out += addons.children
        if addons.resync_after_seconds is not None:
            resync.append(addons.resync_after_seconds)
    return Addons(tuple(out), min(resync) if resync else None)


def decorate_pod(job: Json, pod: Json) -> Json:
    """The desired pod with what every applying extension adds to it; `pod` itself when none does."""
    found = ours(job)
    for ext in EXTENSIONS:
        values = _owned(ext, found)
        if _applies(ext, values):
            pod = ext.decorate_pod(job, values, pod)
    return pod


def explain_failures(job: Json, failures: list[ReplicaFailure]) -> str:
    """What the applying extensions know of why these replicas failed, one sentence each ("" when none
    does), for the job's Failed condition message."""
    found = ours(job)
    out: list[str] = []
    for ext in EXTENSIONS:
        values = _owned(ext, found)
        if _applies(ext, values):
            out += [s for f in failures if (s := ext.explain_failure(job, values, f))]
    return " ".join(out)


def child_types() -> tuple[ChildType, ...]:
    """The child types of every extension, once each, in registry order."""
    seen: list[ChildType] = []
    for ext in EXTENSIONS:
        seen += [t for t in ext.child_types if t not in seen]
    return tuple(seen)


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
    return _owned(ext, ours(job))
