"""What one extension is, and the small kit every extension builds on.

Our extensions never change the kubeflow.org/v1 schema. Each is a set of annotations under
`trainop.dev/` on the job; defaulting writes what they resolve to into the job itself (so the mutating
webhook's patch stores it and `kubectl get -o yaml` shows what will run), and validation reports a bad
value with the annotation's path and how to fix it. An extension may also give the job children of its
own (a TensorBoard), which the sync hook returns beside the framework's; every CompositeController
declares their types. A job without our annotations is never touched.

The convention is the frameworks': values in, values out. Admission hands an extension a `Draft` (the
job as sent, with its kind's facts) and gets a new `Draft` back; the sync hands it the `JobContext` the
frameworks get and gets new children, a new pod, or a sentence back. Nothing is changed in place.
Which extensions apply to a job, and with which annotation values, is resolved once by admission
(trainop.extensions.resolve) and carried to every later step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any, Final

from trainop.api.checks import Result
from trainop.api.constants import LABEL_JOB_NAME
from trainop.api.kinds import ChildType, KindInfo
from trainop.extensions.faces import Faces
from trainop.frameworks import KINDS
from trainop.job.context import JobContext
from trainop.job.mounts import Mounted
from trainop.jsontypes import Json

PREFIX: Final = "trainop.dev/"
# On every child an extension returns, naming the extension: the framework's own children never carry it.
COMPONENT_LABEL: Final = f"{PREFIX}component"


def annotation_path(key: str) -> str:
    """The field path of an annotation, as errors name it."""
    return f"metadata.annotations[{key}]"


def as_object(value: Any) -> Json:
    """`value` when it is a JSON object, else {}: for reading input validation has not judged yet."""
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------------------------- the job
@dataclass(frozen=True)
class Draft:
    """A job under admission as an extension sees it: the JSON as sent (validation has not judged it yet,
    so any field may be malformed), its kind's facts when the kind is ours, and the annotations the
    extensions' defaulting has written so far."""

    job: Json
    # Annotations written by defaulting, so the registry knows each extension's values after it ran
    # without reading the job's annotations again.
    written: Mapping[str, str] = field(default_factory=dict)

    @property
    def info(self) -> KindInfo | None:
        kind = self.job.get("kind")
        return KINDS.get(kind) if isinstance(kind, str) else None

    @property
    def name(self) -> str | None:
        name = as_object(self.job.get("metadata")).get("name")
        return name if isinstance(name, str) else None

    @property
    def replica_specs(self) -> Json:
        """The replica map as found, keyed as the job spells it; {} when there is none to read."""
        info = self.info
        return as_object(as_object(self.job.get("spec")).get(info.replica_field)) if info else {}

    def find_type(self, rtype: str) -> str | None:
        """The job's own spelling of a replica type (replica-map keys match in any case)."""
        return next((k for k in self.replica_specs if k.lower() == rtype.lower()), None)

    def templates(self) -> Iterator[tuple[str, Json]]:
        """(replica key, pod template) of every replica spec whose template is an object."""
        for key, replica in self.replica_specs.items():
            template = as_object(replica).get("template")
            if isinstance(template, dict):
                yield key, template

    def with_templates(self, rewrite: Callable[[str, Json], Json]) -> Draft:
        """The draft with `rewrite(replica key, template)` in place of every template; copy-on-write:
        only the objects on the changed paths are new, and the very same draft when none changed."""
        info = self.info
        changed = {}
        for key, template in self.templates():
            new = rewrite(key, template)
            if new is not template:
                changed[key] = {**self.replica_specs[key], "template": new}
        if info is None or not changed:
            return self
        spec = self.job["spec"]
        job = {**self.job, "spec": {**spec, info.replica_field: {**spec[info.replica_field], **changed}}}
        return Draft(job, self.written)

    def written_by(self, owns: Callable[[str], bool]) -> dict[str, str]:
        """The annotations defaulting has written so far whose keys `owns` claims."""
        return {k: v for k, v in self.written.items() if owns(k)}

    def with_annotations(self, added: Mapping[str, str]) -> Draft:
        """The draft with `added` written into its annotations (copy-on-write); unchanged when `added` is
        empty or the metadata cannot hold annotations (validation reports that)."""
        meta = self.job.get("metadata")
        annotations = as_object(meta).get("annotations") if isinstance(meta, dict) else None
        if not added or not isinstance(meta, dict) or not isinstance(annotations, dict | None):
            return self
        job = {**self.job, "metadata": {**meta, "annotations": {**(annotations or {}), **added}}}
        return Draft(job, {**self.written, **added})


def per_type_suffix(key: str, annotation: str) -> str | None:
    """The replica type a per-type key `<annotation>.<Type>` names, "" for `annotation` itself, None for
    any other key."""
    if key == annotation:
        return ""
    return key[len(annotation) + 1 :] if key.startswith(f"{annotation}.") else None


def owns_family(key: str, annotation: str) -> bool:
    """Whether `key` is `annotation` or one of its per-type keys `<annotation>.<Type>`."""
    return per_type_suffix(key, annotation) is not None


# ---------------------------------------------------------------------------------------------- shipped files
@cache
def _package_file(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class ShippedFile:
    """A file of an extension's package that reaches the job's pods as the ConfigMap child
    `<job>-<suffix>`, mounted read-only at `mount_path`. One per job, so an operator upgrade never
    changes the program of a running job."""

    package: str
    file: str
    suffix: str
    volume_name: str
    mount_path: str
    component: str  # the extension's name, on the child's COMPONENT_LABEL

    @property
    def source(self) -> str:
        return _package_file(self.package, self.file)

    @property
    def path(self) -> str:
        """Where the file is inside a container that mounts it."""
        return f"{self.mount_path}/{self.file}"

    def child_name(self, job_name: str) -> str:
        return f"{job_name}-{self.suffix}"

    def volume(self, job_name: str) -> Json:
        return {"name": self.volume_name, "configMap": {"name": self.child_name(job_name)}}

    def mount(self) -> Json:
        return {"name": self.volume_name, "mountPath": self.mount_path, "readOnly": True}

    def mounted(self, ctx: JobContext, replica_types: frozenset[str] | None = None) -> Mounted:
        """The child as the pods of `replica_types` (None: every type) mount it: the whole ConfigMap,
        holding this file and nothing else, byte for byte (trainop.job.mounts)."""
        return Mounted(
            self.child_name(ctx.name),
            exact={self.file: self.source},
            whole=True,
            replica_types=replica_types,
            what=self.file,
        )

    def config_map(self, ctx: JobContext) -> Json:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.child_name(ctx.name),
                "namespace": ctx.namespace,
                "labels": {LABEL_JOB_NAME: ctx.name, COMPONENT_LABEL: self.component},
            },
            "data": {self.file: self.source},
        }


# ---------------------------------------------------------------------------------------------- the contract
@dataclass(frozen=True)
class AnnotationDoc:
    """One row of the README's annotation table."""

    key: str  # the key, with <placeholders> for a family of keys
    value: str  # the value's form
    effect: str  # what defaulting writes into the job, or what the annotation does
    example: str  # a complete `key: value` line


@dataclass(frozen=True)
class JobState:
    """What the sync hook tells an extension about the job it builds children for."""

    # The job's completionTime once it has succeeded or failed, else None.
    finished_at: datetime | None
    now: datetime


@dataclass(frozen=True)
class ReplicaFailure:
    """A replica's pod that failed for good, as the sync saw it."""

    rtype: str  # the canonical replica type
    pod: str
    exit_code: int | None  # of the framework's exit-code container, if it terminated


@dataclass(frozen=True)
class Addons:
    """An extension's children of one job, and when the hook must look again (a child that expires)."""

    children: tuple[Json, ...] = ()
    resync_after_seconds: float | None = None


class Extension(Faces, ABC):
    """One feature carried by annotations. Subclasses are registered in trainop.extensions.EXTENSIONS.

    `values` is always this extension's annotations of the job (full keys, string values) as admission
    resolved them: after defaulting, so they include what defaulting wrote. Its faces outside admission
    and the sync (`trainop run`, the UI, the chart) are `Faces`' (trainop.extensions.faces)."""

    name: str
    docs: tuple[AnnotationDoc, ...]
    # Child types besides pods and Services that `children` may return.
    child_types: tuple[ChildType, ...] = ()
    # The package files this extension may ship to a job's pods (each a ConfigMap child).
    shipped: tuple[ShippedFile, ...] = ()

    @abstractmethod
    def owns(self, key: str) -> bool:
        """Whether this extension reads the annotation `key` (a full key under PREFIX)."""

    def check_settings(self, environ: Mapping[str, str]) -> None:
        """Raise SettingError naming the variable when one of this extension's cluster settings in
        `environ` is malformed: the servers call it at start-up, so such a setting stops them there
        instead of refusing every job that meets it. None by default."""
        return None

    def applies_without_annotations(self) -> bool:
        """Whether `default` and `validate` run on a job that has none of this extension's annotations
        (a cluster default configured for every job). Off unless an extension has such a default."""
        return False

    # ---- admission --------------------------------------------------------------------------------
    @abstractmethod
    def default(self, draft: Draft, values: Mapping[str, str]) -> Draft:
        """The draft with what `values` resolve to written in; annotations it adds go through
        `Draft.with_annotations`, so they become part of the job's resolved values.

        Pure, idempotent and copy-on-write (`Draft.with_templates`). Leave anything it cannot resolve (a
        bad value, a conflicting field) as it is, for `validate` to report."""

    @abstractmethod
    def validate(self, draft: Draft, values: Mapping[str, str], result: Result) -> None:
        """Report every problem with `values` on the defaulted job, naming the annotation or field."""

    # ---- the sync ---------------------------------------------------------------------------------
    def children(self, ctx: JobContext, values: Mapping[str, str], state: JobState) -> Addons:
        """The children this extension gives the admitted job now. Pure: same input, same output."""
        return Addons()

    def mounts(self, ctx: JobContext, values: Mapping[str, str]) -> tuple[Mounted, ...]:
        """The ConfigMap children among `children` whose content the pods run (a `ShippedFile`'s
        `mounted`): a pod that mounts one is created only once it is the job's own with that content, and
        waits until then (trainop.job.mounts). None by default."""
        return ()

    def explain_failure(self, ctx: JobContext, values: Mapping[str, str], failure: ReplicaFailure) -> str:
        """Why the admitted job's replica failed, when this extension made it run something the user did
        not write and knows the cause from the exit code ("" otherwise): added to the job's Failed
        condition message. Never read from a log or a message, which the program's user controls."""
        return ""

    def decorate_pod(self, ctx: JobContext, values: Mapping[str, str], pod: Json) -> Json:
        """The desired pod with what this extension adds to each pod (per-pod values the template cannot
        hold: the job's child names). Pure: returns a new pod or `pod`."""
        return pod
