"""What one extension is: the annotations it owns, how it defaults a job from them, how it validates them.

Our extensions never change the kubeflow.org/v1 schema. Each is a set of annotations under
`trainop.dev/` on the job; defaulting writes what they resolve to into the job itself (so the mutating
webhook's patch stores it and `kubectl get -o yaml` shows what will run), and validation reports a bad
value with the annotation's path and how to fix it. An extension may also give the job children of its
own (a TensorBoard), which the sync hook returns beside the framework's; every CompositeController
declares their types. A job without our annotations is never touched.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from trainop.api.checks import Result
from trainop.api.kinds import ChildType
from trainop.extensions.faces import Faces
from trainop.jsontypes import Json

PREFIX: Final = "trainop.dev/"
# On every child an extension returns, naming the extension: the framework's own children never carry it.
COMPONENT_LABEL: Final = f"{PREFIX}component"


def annotation_path(key: str) -> str:
    """The field path of an annotation, as errors name it."""
    return f"metadata.annotations[{key}]"


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

    rtype: str  # the job's replica-type key
    pod: str
    exit_code: int | None  # of the framework's exit-code container, if it terminated


@dataclass(frozen=True)
class Addons:
    """An extension's children of one job, and when the hook must look again (a child that expires)."""

    children: tuple[Json, ...] = ()
    resync_after_seconds: float | None = None


class Extension(Faces, ABC):
    """One feature carried by annotations. Subclasses are registered in trainop.extensions.EXTENSIONS.

    Its faces outside admission and the sync (`trainop run`, the UI, the chart) are `Faces`'
    (trainop.extensions.faces)."""

    name: str
    docs: tuple[AnnotationDoc, ...]
    # Child types besides pods and Services that `children` may return.
    child_types: tuple[ChildType, ...] = ()

    @abstractmethod
    def owns(self, key: str) -> bool:
        """Whether this extension reads the annotation `key` (a full key under PREFIX)."""

    def applies_without_annotations(self) -> bool:
        """Whether `default` and `validate` run on a job that has none of this extension's annotations
        (a cluster default configured for every job). Off unless an extension has such a default."""
        return False

    @abstractmethod
    def default(self, job: Json, values: Mapping[str, str]) -> Json:
        """The job with what `values` (this extension's annotations, all strings) resolve to written in.

        Pure, idempotent, and copy-on-write like trainop.admission.defaults: copy only the objects on
        the paths it changes. Leave anything it cannot resolve (a bad value, a conflicting field) as it
        is, for `validate` to report."""

    @abstractmethod
    def validate(self, job: Json, values: Mapping[str, str], result: Result) -> None:
        """Report every problem with `values` on the defaulted `job`, naming the annotation or field."""

    def children(self, job: Json, values: Mapping[str, str], state: JobState) -> Addons:
        """The children this extension gives the admitted `job` now. Pure: same input, same output."""
        return Addons()

    def explain_failure(self, job: Json, values: Mapping[str, str], failure: ReplicaFailure) -> str:
        """Why the admitted `job`'s replica failed, when this extension made it run something the user
        did not write and knows the cause from the exit code ("" otherwise): added to the job's Failed
        condition message. Never read from a log or a message, which the program's user controls."""
        return ""

    def decorate_pod(self, job: Json, values: Mapping[str, str], pod: Json) -> Json:
        """The desired pod of the admitted `job` with what this extension adds to each pod (per-pod
        values the template cannot hold: the job's child names). Pure: returns a new pod or `pod`."""
        return pod
