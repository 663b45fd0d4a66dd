"""Placement: where the pods of a replica type go, as plain pod affinity written into its template.

`trainop.dev/placement: <policy>` applies to every replica type of the job,
`trainop.dev/placement.<ReplicaType>: <policy>` to one (it wins over the job-wide one). A policy is
`<mode>[:<node label>]`:

| mode | what the scheduler is told |
| --- | --- |
| `spread` | required anti-affinity among the job's pods of that replica type: one per domain |
| `spread-preferred` | the same, preferred (weight 100) |
| `pack` | required affinity to the job's pods: all in one domain (the first pod picks it) |
| `pack-preferred` | the same, preferred |
| `exclusive` | `pack`, plus required anti-affinity to other jobs' pods in the namespace: one job per domain |

The node label (the topology key) defaults to `kubernetes.io/hostname` for `spread`; `pack` and
`exclusive` need one (e.g. `topology.kubernetes.io/zone`, a rack label). Every term selects pods with
`matchLabelKeys` (the job-name and replica-type labels the hook puts on each pod), so the template holds
nothing job-specific: the apiserver fills in the values when it creates each pod.

Cluster defaults per replica type come from TRAINOP_PLACEMENT_DEFAULTS (`PS=spread,Worker=...`, the
chart's `placement.defaults`); defaulting writes a default into the job as its `placement.<Type>`
annotation, so what applies is visible on the job. docs/placement.md has the terms in full.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from trainop.api.checks import Result
from trainop.api.constants import LABEL_JOB_NAME, LABEL_OPERATOR_NAME, LABEL_REPLICA_TYPE
from trainop.api.kinds import KindInfo
from trainop.envvalues import SettingError
from trainop.extensions.base import (
    PREFIX,
    AnnotationDoc,
    Draft,
    Extension,
    annotation_path,
    as_object,
    owns_family,
    per_type_suffix,
)
from trainop.extensions.faces import ChartValue
from trainop.frameworks import KINDS
from trainop.jsontypes import Json

ANNOTATION: Final = f"{PREFIX}placement"
DEFAULTS_ENV: Final = "TRAINOP_PLACEMENT_DEFAULTS"
LOCAL_NOTICE: Final = f"the job's {ANNOTATION} rules are ignored: every pod of a local run is on this machine"
HOSTNAME: Final = "kubernetes.io/hostname"
PREFERRED_WEIGHT: Final = 100
MODES: Final = ("spread", "spread-preferred", "pack", "pack-preferred", "exclusive")
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
LABEL_KEY: Final = re.compile(rf"^({_DNS_SUBDOMAIN}/)?{_NAME}$")


@dataclass(frozen=True)
class Policy:
    mode: str  # "spread", "pack" or "exclusive"
    topology_key: str
    required: bool

    def describe(self) -> str:
        strength = "required" if self.required else "preferred"
        return f"{self.mode} over {self.topology_key} ({strength})"


def parse_policy(value: str) -> Policy | str:
    """The policy a value names, or what is wrong with it (said so a user can fix the value)."""
    mode, _, key = value.partition(":")
    if mode not in MODES:
        return (
            f'Unsupported value: "{value}": a placement is one of {", ".join(MODES)}, optionally followed '
            'by ":<node label>", e.g. "spread" or "pack:topology.kubernetes.io/zone"'
        )
    base, _, strength = mode.partition("-")
    if value.endswith(":"):
        return f'Invalid value: "{value}": name a node label after ":", or leave the ":" out'
    if not key:
        if base != "spread":
            example = f"{mode}:topology.kubernetes.io/zone"
            return f'Invalid value: "{value}": {mode} needs a node label, e.g. "{example}"'
        key = HOSTNAME
    if len(key) > 316 or not LABEL_KEY.fullmatch(key) or len(key.rpartition("/")[2]) > 63:
        return (
            f'Invalid value: "{value}": "{key}" is not a node label key (an optional DNS prefix and "/", '
            "then at most 63 letters, digits, '-', '_' or '.')"
        )
    return Policy(base, key, required=strength != "preferred")


def parse_defaults(raw: str) -> dict[str, Policy]:
    """Cluster defaults from `Type=policy,Type=policy`; ValueError naming the bad entry."""
    out: dict[str, Policy] = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        rtype, sep, value = entry.partition("=")
        if not sep or not rtype.strip():
            raise ValueError(f"{DEFAULTS_ENV}: {entry!r} is not <ReplicaType>=<placement>")
        policy = parse_policy(value.strip())
        if isinstance(policy, str):
            raise ValueError(f"{DEFAULTS_ENV}: {rtype.strip()}: {policy}")
        out[rtype.strip()] = policy
    return out


def _selector() -> Json:
    # matchLabelKeys needs a labelSelector to merge into, and the apiserver refuses a key that is in
    # both (it merges `key in (<this pod's value>)` before it validates): select training pods by
    # the operator-name label every pod of a job carries.
    return {"matchExpressions": [{"key": LABEL_OPERATOR_NAME, "operator": "Exists"}]}


def _term(policy: Policy, keys: list[str], *, mismatch: bool = False) -> Json:
    term: Json = {"labelSelector": _selector(), "topologyKey": policy.topology_key}
    term["mismatchLabelKeys" if mismatch else "matchLabelKeys"] = list(keys)
    return term


def affinity_terms(policy: Policy) -> list[tuple[str, str, Json]]:
    """(podAffinity|podAntiAffinity, required|preferred list, term) for a policy, in a fixed order."""
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"

    def place(kind: str, term: Json) -> tuple[str, str, Json]:
        if policy.required:
            return kind, required, term
        return kind, preferred, {"weight": PREFERRED_WEIGHT, "podAffinityTerm": term}

    if policy.mode == "spread":
        return [place("podAntiAffinity", _term(policy, [LABEL_JOB_NAME, LABEL_REPLICA_TYPE]))]
    out = [place("podAffinity", _term(policy, [LABEL_JOB_NAME]))]
    if policy.mode == "exclusive":
        out.append(place("podAntiAffinity", _term(policy, [LABEL_JOB_NAME], mismatch=True)))
    return out


def with_terms(template: Json, policy: Policy) -> Json:
    """The pod template with the policy's terms added to its affinity; unchanged if already there."""
    spec = as_object(template.get("spec"))
    affinity = as_object(spec.get("affinity"))
    new_affinity = copy.deepcopy(affinity)
    changed = False
    for kind, strength, term in affinity_terms(policy):
        section = new_affinity.setdefault(kind, {})
        if not isinstance(section, dict):
            continue  # not a pod (anti-)affinity: the schema check reports it
        terms = section.setdefault(strength, [])
        if isinstance(terms, list) and term not in terms:
            terms.append(term)
            changed = True
    if not changed:
        return template
    return {**template, "spec": {**spec, "affinity": new_affinity}}


class Placement(Extension):
    name = "placement"
    docs = (
        AnnotationDoc(
            key=f"{ANNOTATION}, {ANNOTATION}.<ReplicaType>",
            value="spread[:<label>], spread-preferred[:<label>], pack:<label>, pack-preferred:<label>, "
            "exclusive:<label>",
            effect="pod affinity / anti-affinity terms (with matchLabelKeys) in the replica types' "
            "templates; cluster defaults per replica type are written in as annotations",
            example=f"{ANNOTATION}.{next(iter(KINDS.values())).worker_type}: spread",
        ),
    )

    def __init__(self, env: Mapping[str, str] = os.environ) -> None:
        self._env = env

    def check_settings(self, environ: Mapping[str, str]) -> None:
        raw = environ.get(DEFAULTS_ENV, "")
        try:
            parse_defaults(raw)
        except ValueError as e:
            expects = f"<ReplicaType>=<placement>[,...] ({str(e).removeprefix(DEFAULTS_ENV + ': ')})"
            raise SettingError(DEFAULTS_ENV, expects, raw) from None

    def owns(self, key: str) -> bool:
        return owns_family(key, ANNOTATION)

    # ---- faces -----------------------------------------------------------------------------------
    chart_values = (ChartValue("placement.defaults", DEFAULTS_ENV),)

    def local_notices(self, values: Mapping[str, str]) -> tuple[str, ...]:
        # Every pod of a local run is on this machine: no rule can do anything there.
        return (LOCAL_NOTICE,) if values else ()

    def cluster_defaults(self) -> dict[str, Policy]:
        return parse_defaults(self._env.get(DEFAULTS_ENV, ""))

    def applies_without_annotations(self) -> bool:
        try:
            return bool(self.cluster_defaults())
        except ValueError:
            return True  # so validation reports the broken setting

    def default(self, draft: Draft, values: Mapping[str, str]) -> Draft:
        info = draft.info
        if info is None:
            return draft
        try:
            defaults = self.cluster_defaults()
        except ValueError:
            defaults = {}
        draft = _with_default_annotations(draft, info, values, defaults)
        values = {**values, **draft.written_by(self.owns)}

        def place(rtype: str, template: Json) -> Json:
            value = _effective(values, rtype, info)
            policy = parse_policy(value) if value is not None else None
            return with_terms(template, policy) if isinstance(policy, Policy) else template

        return draft.with_templates(place)

    def validate(self, draft: Draft, values: Mapping[str, str], result: Result) -> None:
        try:
            self.cluster_defaults()
        except ValueError as e:
            result.error(DEFAULTS_ENV, f"{e} (the cluster's placement defaults: ask its administrator)")
        info = draft.info
        if info is None:
            return
        specs = draft.replica_specs
        for key, value in sorted(values.items()):
            path = annotation_path(key)
            parsed = parse_policy(value)
            if isinstance(parsed, str):
                result.error(path, parsed)
                continue
            if key != ANNOTATION:
                rtype = per_type_suffix(key, ANNOTATION) or ""
                if rtype not in specs:
                    known = ", ".join(sorted(specs)) or "none"
                    result.error(
                        path,
                        f'Invalid value: "{rtype}" is not a replica type of this {info.kind} '
                        f"(it has {known}); name one of them after {ANNOTATION}.",
                    )
        for rtype, replica in specs.items():
            effective = _effective(values, rtype, info)
            policy = parse_policy(effective) if effective is not None else None
            replicas = replica.get("replicas") if isinstance(replica, dict) else None
            if isinstance(policy, Policy) and policy.required and isinstance(replicas, int):
                warning = _hard_rule_warning(info, rtype, replicas, policy)
                if warning:
                    result.warnings.append(warning)


def _hard_rule_warning(info: KindInfo, rtype: str, replicas: int, policy: Policy) -> str:
    field = f"spec.{info.replica_field}[{rtype}]"
    if policy.mode == "spread" and replicas > 1:
        return (
            f"{field}: placement {policy.describe()}: the {replicas} {rtype} pods need {replicas} nodes with "
            f"distinct {policy.topology_key} values; a pod that finds none stays Pending with the "
            "scheduler's reason (use spread-preferred to let pods share)"
        )
    if policy.mode == "exclusive":
        return (
            f"{field}: placement {policy.describe()}: the job needs a {policy.topology_key} domain without "
            "pods of other jobs in this namespace; until one is free its pods stay Pending"
        )
    return ""


def _effective(values: Mapping[str, str], rtype: str, info: KindInfo) -> str | None:
    canonical = info.canonical_type(rtype) or rtype
    for key in (f"{ANNOTATION}.{rtype}", f"{ANNOTATION}.{canonical}", ANNOTATION):
        if key in values:
            return values[key]
    return None


def _with_default_annotations(
    draft: Draft, info: KindInfo, values: Mapping[str, str], defaults: Mapping[str, Policy]
) -> Draft:
    """Write the cluster default of each replica type the job leaves unplaced, as its annotation."""
    added: dict[str, str] = {}
    for rtype in draft.replica_specs:
        canonical = info.canonical_type(rtype) or rtype
        policy = defaults.get(canonical)
        if policy is not None and _effective(values, rtype, info) is None:
            added[f"{ANNOTATION}.{rtype}"] = _spell(policy)
    return draft.with_annotations(added)


def _spell(policy: Policy) -> str:
    mode = policy.mode if policy.required else f"{policy.mode}-preferred"
    if policy.mode == "spread" and policy.topology_key == HOSTNAME:
        return mode
    return f"{mode}:{policy.topology_key}"
