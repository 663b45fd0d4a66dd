"""Accelerator profiles: one annotation per replica type picks a named profile and a device count.

`trainop.dev/accelerator.<ReplicaType>: <profile>[:<count>]` (count 1 when left out). Defaulting writes
the profile's resolution into that replica's pod template: `<count>` of the profile's device resource
in the limits of the kind's container (the first container when none has the kind's name), the
profile's nodeSelector entries and tolerations on the pod, and its env on that container. Values the
user already set are kept; one that disagrees with the profile is reported by validation with the
field's path, so the stored template is always exactly what the profile says plus what the user wrote.

The profiles come from the file named by TRAINOP_ACCELERATOR_PROFILES (the chart and the kustomize
component mount one into both servers), else from the list shipped in this package (profiles.yaml).
docs/accelerators.md describes the format and every shipped profile.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml

from trainop.api import devices, quantity
from trainop.api.checks import Result, quote_all
from trainop.api.kinds import KindInfo
from trainop.envvalues import SettingError
from trainop.extensions.base import (
    PREFIX,
    AnnotationDoc,
    Draft,
    Extension,
    annotation_path,
    owns_family,
    per_type_suffix,
)
from trainop.extensions.faces import ChartValue, WizardField
from trainop.frameworks import KINDS
from trainop.jsontypes import Json

ANNOTATION: Final = f"{PREFIX}accelerator"
PROFILES_ENV: Final = "TRAINOP_ACCELERATOR_PROFILES"
# Where the chart mounts its profiles (the ConfigMap <release>-accelerators) into both servers.
CHART_PROFILES_FILE: Final = "/etc/trainop/accelerators/profiles.yaml"
# The creation wizard's fields per replica type: a profile and its device count (the annotation's value).
PROFILE_FIELD: Final = "accelerator"
COUNT_FIELD: Final = "acceleratorCount"
VALUE: Final = re.compile(r"^(?P<profile>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)(:(?P<count>[0-9]+))?$")
PROFILE_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# Far above any node (16 Trainium devices, 128 NeuronCores); a typo such as 80 for 8 still fits, but a
# runaway number does not reach the scheduler as a pod that can never run.
MAX_COUNT: Final = 1024
PROFILE_KEYS: Final = ("description", "resource", "nodeSelector", "tolerations", "env")
TOLERATION_KEYS: Final = ("key", "operator", "value", "effect", "tolerationSeconds")


class ProfileError(ValueError):
    pass


@dataclass(frozen=True)
class Profile:
    name: str
    resource: str
    description: str = ""
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Json, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------------------------------------- profiles
def parse_profiles(data: Any, source: str) -> dict[str, Profile]:
    """Profiles from their YAML form (a mapping of name to profile), or a ProfileError naming the field."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: must be a mapping of profile names to profiles")
    return {str(name): _profile(str(name), raw, f"{source}: {name}") for name, raw in data.items()}


def _profile(name: str, raw: Any, where: str) -> Profile:
    if not PROFILE_NAME.fullmatch(name):
        raise ProfileError(f"{where}: a profile name is lowercase letters, digits, '-' and '.'")
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: must be a mapping with at least 'resource'")
    unknown = sorted(set(raw) - set(PROFILE_KEYS))
    if unknown:
        raise ProfileError(f"{where}: unknown keys {unknown}; a profile has {', '.join(PROFILE_KEYS)}")
    resource = raw.get("resource")
    if not isinstance(resource, str) or "/" not in resource:
        raise ProfileError(f"{where}.resource: must be an extended resource name such as nvidia.com/gpu")
    selector = raw.get("nodeSelector") or {}
    if not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        raise ProfileError(f'{where}.nodeSelector: must map label keys to string values (quote "true")')
    tolerations = raw.get("tolerations") or []
    if not isinstance(tolerations, list) or not all(
        isinstance(t, dict) and set(t) <= set(TOLERATION_KEYS) for t in tolerations
    ):
        raise ProfileError(
            f"{where}.tolerations: must be a list of tolerations ({', '.join(TOLERATION_KEYS)})"
        )
    env = raw.get("env") or []
    if not isinstance(env, list) or not all(
        isinstance(e, dict) and set(e) == {"name", "value"} and all(isinstance(v, str) for v in e.values())
        for e in env
    ):
        raise ProfileError(f"{where}.env: must be a list of {{name, value}} with string values")
    return Profile(
        name=name,
        resource=resource,
        description=str(raw.get("description") or ""),
        node_selector=tuple((str(k), v) for k, v in selector.items()),
        tolerations=tuple(dict(t) for t in tolerations),
        env=tuple((e["name"], e["value"]) for e in env),
    )


def builtin_profiles_text() -> str:
    return resources.files(__package__).joinpath("profiles.yaml").read_text()


def builtin_profiles() -> dict[str, Profile]:
    return parse_profiles(yaml.safe_load(builtin_profiles_text()), "built-in profiles")


@dataclass(frozen=True)
class Catalogue:
    profiles: Mapping[str, Profile]
    # Why the configured file could not be read; every job that asks for a profile is then refused.
    error: str | None = None


_cache: dict[tuple[str, int, int], Catalogue] = {}
_lock = threading.Lock()


def catalogue(env: Mapping[str, str] = os.environ) -> Catalogue:
    """The profiles in force. A mounted ConfigMap changes in place, so the file is re-read when its
    modification time or size changes; a stat per admission is the whole cost otherwise."""
    path = env.get(PROFILES_ENV, "")
    if not path:
        key = ("", 0, 0)
    else:
        try:
            st = Path(path).stat()
        except OSError as exc:
            return Catalogue({}, f"{PROFILES_ENV}={path}: {exc.strerror}")
        key = (path, st.st_mtime_ns, st.st_size)
    with _lock:
        found = _cache.get(key)
        if found is None:
            found = _load(path)
            _cache.clear()
            _cache[key] = found
        return found


def _load(path: str) -> Catalogue:
    if not path:
        return Catalogue(builtin_profiles())
    try:
        return Catalogue(parse_profiles(yaml.safe_load(Path(path).read_text()), path))
    except (OSError, yaml.YAMLError, ProfileError) as exc:
        return Catalogue({}, " ".join(str(exc).split()))


# ---------------------------------------------------------------------------------------------- resolution
@dataclass(frozen=True)
class Conflict:
    path: str  # relative to the pod template's spec
    found: Any
    wanted: Any
    # What to do about it, when more than "remove the field" is needed.
    advice: str = ""


def target_container(info: KindInfo, containers: list[Any]) -> int:
    named = [
        i for i, c in enumerate(containers) if isinstance(c, dict) and c.get("name") == info.default_container
    ]
    return named[0] if named else 0


def resolve(info: KindInfo, pod_spec: Json, profile: Profile, count: int) -> tuple[Json, list[Conflict]]:
    """The pod spec with `count` devices of `profile` written in, and what the user set that disagrees.

    Shares with `pod_spec` every object it does not change."""
    conflicts: list[Conflict] = []
    out = dict(pod_spec)
    containers = pod_spec.get("containers")
    index = target_container(info, containers) if isinstance(containers, list) else 0
    if isinstance(containers, list) and containers and isinstance(containers[index], dict):
        out["containers"] = [*containers]
        out["containers"][index] = _resolve_container(
            dict(containers[index]), f"containers[{index}]", profile, count, conflicts
        )
    selector = pod_spec.get("nodeSelector")
    if selector is None or isinstance(selector, dict):
        merged = dict(selector or {})
        for key, value in profile.node_selector:
            if key in merged and merged[key] != value:
                conflicts.append(Conflict(f"nodeSelector[{key}]", merged[key], value))
            merged.setdefault(key, value)
        if merged != (selector or {}):
            out["nodeSelector"] = merged
    tolerations = pod_spec.get("tolerations")
    if tolerations is None or isinstance(tolerations, list):
        missing = [t for t in profile.tolerations if t not in (tolerations or [])]
        if missing:
            out["tolerations"] = [*(tolerations or []), *(dict(t) for t in missing)]
    return out, conflicts


def _resolve_container(
    container: Json, path: str, profile: Profile, count: int, conflicts: list[Conflict]
) -> Json:
    res = container.get("resources")
    if res is None or isinstance(res, dict):
        res = dict(res or {})
        limits = res.get("limits")
        if limits is None or isinstance(limits, dict):
            limits = dict(limits or {})
            have = limits.get(profile.resource)
            if have is None:
                limits[profile.resource] = str(count)
            elif _quantity(have) != Decimal(count):
                conflicts.append(Conflict(f"{path}.resources.limits[{profile.resource}]", have, str(count)))
            res["limits"] = limits
        requests = res.get("requests")
        if isinstance(requests, dict) and profile.resource in requests:
            have = requests[profile.resource]
            if _quantity(have) != Decimal(count):
                conflicts.append(Conflict(f"{path}.resources.requests[{profile.resource}]", have, str(count)))
        for key in ("limits", "requests"):
            values = res.get(key)
            if not isinstance(values, dict):
                continue
            for name in values:
                if isinstance(name, str) and name != profile.resource and devices.is_device(name):
                    conflicts.append(
                        Conflict(
                            f"{path}.resources.{key}[{name}]",
                            values[name],
                            None,
                            f"the profile asks for {profile.resource}; a pod with two kinds of "
                            "accelerator is not what a profile describes: remove it or the annotation",
                        )
                    )
        container["resources"] = res
    env = container.get("env")
    if profile.env and (env is None or isinstance(env, list)):
        env = [*(env or [])]
        by_name = {e.get("name"): (i, e) for i, e in enumerate(env) if isinstance(e, dict)}
        for name, value in profile.env:
            if name not in by_name:
                env.append({"name": name, "value": value})
                continue
            i, have = by_name[name]
            if have != {"name": name, "value": value}:
                conflicts.append(Conflict(f"{path}.env[{i}]", have, {"name": name, "value": value}))
        container["env"] = env
    return container


def _quantity(value: Any) -> Decimal | None:
    try:
        return quantity.parse(value)
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------- the extension
@dataclass(frozen=True)
class Choice:
    """One annotation, read: which replica spec (its key in the job) gets which profile and count."""

    annotation: str
    replica_key: str
    profile: Profile
    count: int


class Accelerators(Extension):
    name = "accelerators"
    docs = (
        AnnotationDoc(
            key=f"{ANNOTATION}.<ReplicaType>",
            value=(
                "`<profile>` or `<profile>:<count>` (count 1 when left out); the profiles are listed in "
                "docs/accelerators.md"
            ),
            effect=(
                "Writes the profile into that replica type's pod template: `<count>` of its device "
                "resource in the limits of the kind's container, its nodeSelector, tolerations and env. "
                "A value you set that disagrees with the profile is refused, naming the field."
            ),
            # Every kind's many-replica type is spelt the same; the registry says so, not this module.
            example=f'{ANNOTATION}.{next(iter(KINDS.values())).worker_type}: "nvidia-gke-l4:2"',
        ),
    )

    def check_settings(self, environ: Mapping[str, str]) -> None:
        error = catalogue(environ).error
        if error is not None:
            raise SettingError(PROFILES_ENV, f"a readable profiles file ({error})", environ.get(PROFILES_ENV))

    def owns(self, key: str) -> bool:
        return owns_family(key, ANNOTATION)

    # ---- faces -----------------------------------------------------------------------------------
    chart_values = (ChartValue("accelerators.profiles", PROFILES_ENV, file=CHART_PROFILES_FILE),)

    def wizard_fields(self) -> tuple[WizardField, ...]:
        return (
            WizardField(PROFILE_FIELD, "Accelerator profile", choices=profile_choices),
            WizardField(COUNT_FIELD, "Devices of the profile", hint="1"),
        )

    def form_values(self, annotations: Mapping[str, Any], replica_types: Sequence[str]) -> dict[str, str]:
        values: dict[str, str] = {}
        for key, value in annotations.items():
            rtype = str(key).removeprefix(ANNOTATION + ".")
            if str(key).startswith(ANNOTATION + ".") and rtype in replica_types:
                profile, _, count = str(value).partition(":")
                values[f"{rtype}.{PROFILE_FIELD}"] = profile
                if count:
                    values[f"{rtype}.{COUNT_FIELD}"] = count
        return values

    def form_annotations(
        self,
        annotations: Mapping[str, Any],
        form: Mapping[str, str],
        replica_types: Sequence[str],
        present: Sequence[str],
    ) -> tuple[dict[str, Any], dict[str, list[str]]]:
        # The form's accelerators replace the job's, for every replica type the form has.
        out = {k: v for k, v in annotations.items() if k.removeprefix(ANNOTATION + ".") not in replica_types}
        problems: dict[str, list[str]] = {}
        for rtype in present:
            profile = form.get(f"{rtype}.{PROFILE_FIELD}", "").strip()
            count = form.get(f"{rtype}.{COUNT_FIELD}", "").strip()
            if profile:
                out[f"{ANNOTATION}.{rtype}"] = f"{profile}:{count}" if count else profile
            elif count:
                problems.setdefault(f"{rtype}.{PROFILE_FIELD}", []).append("pick a profile for the count")
        return out, problems

    def form_field(self, path: str) -> str | None:
        prefix = annotation_path(ANNOTATION + ".")[:-1]
        if path.startswith(prefix) and path.endswith("]"):
            return f"{path[len(prefix) : -1]}.{PROFILE_FIELD}"
        return None

    def default(self, draft: Draft, values: Mapping[str, str]) -> Draft:
        info = draft.info
        choices = {c.replica_key: c for c in self._read(draft, values, catalogue())[0]}
        if info is None or not choices:
            return draft

        def equip(key: str, template: Json) -> Json:
            choice = choices.get(key)
            if choice is None:
                return template
            pod_spec, _ = resolve(info, template["spec"], choice.profile, choice.count)
            return {**template, "spec": pod_spec}

        return draft.with_templates(equip)

    def validate(self, draft: Draft, values: Mapping[str, str], result: Result) -> None:
        cat = catalogue()
        choices, problems = self._read(draft, values, cat)
        for path, detail in problems:
            result.error(path, detail)
        info = draft.info
        if info is None:
            return
        for choice in choices:
            rpath = f"spec.{info.replica_field}[{choice.replica_key}].template.spec"
            pod_spec = draft.replica_specs[choice.replica_key]["template"]["spec"]
            _, conflicts = resolve(info, pod_spec, choice.profile, choice.count)
            for conflict in conflicts:
                result.error(f"{rpath}.{conflict.path}", _conflict_message(choice, conflict))

    def _read(
        self, draft: Draft, values: Mapping[str, str], cat: Catalogue
    ) -> tuple[list[Choice], list[tuple[str, str]]]:
        """The annotations that can be resolved, and a (path, message) for each one that cannot."""
        choices: list[Choice] = []
        problems: list[tuple[str, str]] = []
        info = draft.info
        spec = draft.job.get("spec")
        if info is None or not isinstance(spec, dict) or not isinstance(spec.get(info.replica_field), dict):
            return [], []  # Kubeflow's validation reports the missing replica specs.
        replicas = draft.replica_specs
        keys = {info.canonical_type(k) or k: k for k in replicas}
        for key, value in sorted(values.items()):
            path = annotation_path(key)
            suffix = per_type_suffix(key, ANNOTATION) or ""
            rtype = info.canonical_type(suffix) if suffix else None
            if rtype is None or rtype not in keys:
                present = quote_all(f"{ANNOTATION}.{t}" for t in keys)
                problems.append(
                    (
                        path,
                        f"Invalid value: the key must name one of this {info.kind}'s replica types, one "
                        f"annotation per type: {present}",
                    )
                )
                continue
            match = VALUE.fullmatch(value.strip())
            if match is None:
                problems.append(
                    (
                        path,
                        f'Invalid value: "{value}": must be "<profile>" or "<profile>:<count>", '
                        'e.g. "nvidia-gke-l4:2"',
                    )
                )
                continue
            if cat.error is not None:
                problems.append(
                    (
                        path,
                        f"Internal error: the accelerator profiles cannot be read ({cat.error}); ask the "
                        "cluster's administrator to fix the accelerators configuration",
                    )
                )
                continue
            profile = cat.profiles.get(match["profile"])
            if profile is None:
                known = quote_all(sorted(cat.profiles)) or "none are configured"
                problems.append(
                    (
                        path,
                        f'Unsupported value: "{match["profile"]}": unknown accelerator profile; '
                        f"known profiles: {known}",
                    )
                )
                continue
            count = int(match["count"]) if match["count"] is not None else 1
            if not 1 <= count <= MAX_COUNT:
                problems.append(
                    (path, f"Invalid value: {count} devices: the count must be between 1 and {MAX_COUNT}")
                )
                continue
            rspec = replicas[keys[rtype]]
            template = rspec.get("template") if isinstance(rspec, dict) else None
            if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
                continue  # Kubeflow's validation reports the missing template.
            choices.append(Choice(key, keys[rtype], profile, count))
        return choices, problems


def profile_choices() -> list[tuple[str, str]]:
    """The profiles the admission code knows here, by name, with their descriptions, for the wizard's
    picker."""
    return sorted((name, p.description or p.resource) for name, p in catalogue().profiles.items())


def _conflict_message(choice: Choice, conflict: Conflict) -> str:
    source = f'the accelerator profile "{choice.profile.name}" chosen by {annotation_path(choice.annotation)}'
    if conflict.wanted is None:
        return f"Forbidden: {_show(conflict.found)}: conflicts with {source}: {conflict.advice}"
    return (
        f"Invalid value: {_show(conflict.found)}: conflicts with {source}, which sets "
        f"{_show(conflict.wanted)}; remove the field (the profile fills it in) or choose another profile"
    )


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)
