"""The one admission step: who manages the job, its defaulted form, and what validation finds on it.

The webhooks (defaulting patch, then validation), every sync and `trainop run` all go through `admit`,
so a job behaves the same whether or not it passed the webhooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from trainop.admission.defaults import apply_defaults
from trainop.admission.validation import validate
from trainop.api import constants as c
from trainop.api.checks import Result
from trainop.api.jsonpath import dig
from trainop.extensions import NONE, Resolved, resolve
from trainop.frameworks import KINDS
from trainop.jsontypes import Json


def managed_elsewhere(job: Json) -> bool:
    """Whether spec.runPolicy.managedBy names another controller (MultiKueue), which then owns the job."""
    managed_by = dig(job, "spec", "runPolicy", "managedBy")
    # A non-string managedBy names no controller: validation reports it.
    return isinstance(managed_by, str) and bool(managed_by) and managed_by != c.MANAGED_BY_US


def defaulted(job: Json) -> tuple[Json, Resolved]:
    """The job with every default filled in, then what its `trainop.dev/` annotations resolve to, and
    which extensions apply with which values; a job of a kind we do not serve is left for validation."""
    kind = job.get("kind")
    return resolve(apply_defaults(job)) if isinstance(kind, str) and kind in KINDS else (job, NONE)


@dataclass(frozen=True)
class Admission:
    job: Json  # defaulted
    old: Json | None  # the stored job of an UPDATE, defaulted
    managed_elsewhere: bool
    # The extensions that apply to `job`, with their values: what every later step reads.
    extensions: Resolved = NONE

    @cached_property
    def checks(self) -> Result:
        """Validation of the defaulted job (of the transition from `old` on UPDATE); computed on demand
        because the defaulting webhook needs only `job`."""
        return validate(self.job, self.old, self.extensions)


def admit(job: Json, old: Json | None = None) -> Admission:
    admitted, extensions = defaulted(job)
    return Admission(
        job=admitted,
        old=defaulted(old)[0] if old is not None else None,
        managed_elsewhere=managed_elsewhere(job),
        extensions=extensions,
    )
