"""The part of the apiserver's pod validation that covers what `trainop run` turns into names and paths.

On a cluster the apiserver refuses a pod whose container is named `../../x` or whose ConfigMap item is
written to `/abs` or `../x`, so kubelet never sees one. `trainop run` makes directories, files and log
files from those fields, so it applies the same rules, with the apiserver's wording, to every replica's
template before anything starts. Only the rules for fields `trainop run` reads are here; what it cannot run
at all (Secrets, PVCs, envFrom...) is refused later with the reason (trainop.local.containers, .volumes).
"""

from __future__ import annotations

import json
import re
from typing import Any

from trainop.api.checks import FieldError
from trainop.api.kinds import KindInfo
from trainop.jsontypes import Json

DNS1123_LABEL_MAX = 63
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
ENV_NAME_MESSAGE = (
    "a valid environment variable name must consist only of printable ASCII characters other than '='"
)
FILE_MODE_MESSAGE = "must be a number between 0 and 0777 (octal), both inclusive"
# Volume sources a pod may name; more than one in a volume is an error, as none is.
_NOT_A_SOURCE = {"name"}


def quoted(value: Any) -> str:
    """A value as the apiserver's messages print it: strings quoted (Go's %q), numbers bare."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, f"Invalid value: {quoted(value)}: {detail}")


def required(path: str) -> FieldError:
    return FieldError(path, "Required value")


def template_errors(info: KindInfo, job: Json) -> list[FieldError]:
    """Every error the apiserver would return for the pods of a defaulted job, by the template's path."""
    errors: list[FieldError] = []
    for key, replica in ((job.get("spec") or {}).get(info.replica_field) or {}).items():
        template = (replica or {}).get("template") or {}
        rtype = info.canonical_type(str(key)) or key
        errors += pod_spec_errors(
            template.get("spec") or {}, f"spec.{info.replica_field}[{rtype}].template.spec"
        )
    return errors


def pod_spec_errors(spec: Json, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    volumes = _volumes(spec.get("volumes") or [], f"{path}.volumes", errors)
    containers = spec.get("containers") or []
    if not containers:
        errors.append(required(f"{path}.containers"))
    names: set[str] = set()
    for field, items in (("containers", containers), ("initContainers", spec.get("initContainers") or [])):
        for i, container in enumerate(items):
            where = f"{path}.{field}[{i}]"
            errors += container_errors(container, volumes, where)
            name = container.get("name")
            if isinstance(name, str) and name in names:
                errors.append(FieldError(f"{where}.name", f"Duplicate value: {quoted(name)}"))
            elif isinstance(name, str) and name:
                names.add(name)
    return errors


def container_errors(container: Json, volumes: set[str], path: str) -> list[FieldError]:
    errors = dns1123_label(container.get("name"), f"{path}.name")
    for i, var in enumerate(container.get("env") or []):
        errors += env_name(var.get("name"), f"{path}.env[{i}].name")
    mount_paths: set[str] = set()
    for i, mount in enumerate(container.get("volumeMounts") or []):
        where = f"{path}.volumeMounts[{i}]"
        name = mount.get("name")
        if not name:
            errors.append(required(f"{where}.name"))
        if name not in volumes:
            errors.append(FieldError(f"{where}.name", f"Not found: {quoted(name or '')}"))
        mount_path = mount.get("mountPath")
        if not mount_path:
            errors.append(required(f"{where}.mountPath"))
        elif mount_path in mount_paths:
            errors.append(invalid(f"{where}.mountPath", mount_path, "must be unique"))
        mount_paths.add(str(mount_path or ""))
        if mount.get("subPath"):
            errors += descending_path(str(mount["subPath"]), f"{where}.subPath")
        if mount.get("subPathExpr"):
            if mount.get("subPath"):
                errors.append(
                    invalid(
                        f"{where}.subPathExpr",
                        mount["subPathExpr"],
                        "subPathExpr and subPath are mutually exclusive",
                    )
                )
            errors += descending_path(str(mount["subPathExpr"]), f"{where}.subPathExpr")
    return errors


def _volumes(volumes: list[Json], path: str, errors: list[FieldError]) -> set[str]:
    """Check the pod's volumes; the names of the valid ones, which mounts may refer to."""
    names: set[str] = set()
    for i, volume in enumerate(volumes):
        where = f"{path}[{i}]"
        found = dns1123_label(volume.get("name"), f"{where}.name") + _source_errors(volume, where)
        name = volume.get("name")
        if name in names:
            found.append(FieldError(f"{where}.name", f"Duplicate value: {quoted(name)}"))
        if not found:
            names.add(str(name))
        errors += found
    return names


def _source_errors(volume: Json, path: str) -> list[FieldError]:
    sources = [k for k in volume if k not in _NOT_A_SOURCE]
    if not sources:
        return [FieldError(path, "Required value: must specify a volume type")]
    errors = [
        FieldError(f"{path}.{k}", "Forbidden: may not specify more than 1 volume type") for k in sources[1:]
    ]
    kind = sources[0]
    source = volume.get(kind) or {}
    where = f"{path}.{kind}"
    if kind == "configMap":
        if not source.get("name"):
            errors.append(required(f"{where}.name"))
        errors += _mode(source.get("defaultMode"), f"{where}.defaultMode")
        errors += _items(source.get("items") or [], f"{where}.items")
    elif kind == "secret":
        if not source.get("secretName"):
            errors.append(required(f"{where}.secretName"))
        errors += _mode(source.get("defaultMode"), f"{where}.defaultMode")
        errors += _items(source.get("items") or [], f"{where}.items")
    elif kind == "hostPath":
        host_path = source.get("path")
        if not host_path:
            errors.append(required(f"{where}.path"))
        else:
            errors += no_backsteps(str(host_path), f"{where}.path")
    return errors


def _items(items: list[Json], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for i, item in enumerate(items):
        where = f"{path}[{i}]"
        if not item.get("key"):
            errors.append(required(f"{where}.key"))
        if not item.get("path"):
            errors.append(required(f"{where}.path"))
        errors += non_reserved_path(str(item.get("path") or ""), f"{where}.path")
        errors += _mode(item.get("mode"), f"{where}.mode")
    return errors


def _mode(mode: Any, path: str) -> list[FieldError]:
    if isinstance(mode, int) and not 0 <= mode <= 0o777:
        return [invalid(path, mode, FILE_MODE_MESSAGE)]
    return []


def dns1123_label(value: Any, path: str) -> list[FieldError]:
    if not value:
        return [required(path)]
    name = str(value)
    errors = []
    if len(name) > DNS1123_LABEL_MAX:
        errors.append(invalid(path, name, f"must be no more than {DNS1123_LABEL_MAX} characters"))
    if not _DNS1123_LABEL.match(name):
        detail = "must not contain dots" if _DNS1123_SUBDOMAIN.match(name) else DNS1123_LABEL_MESSAGE
        errors.append(invalid(path, name, detail))
    return errors


def env_name(value: Any, path: str) -> list[FieldError]:
    """The relaxed rule (every Kubernetes release since 1.34): printable ASCII, no `=`."""
    if not value:
        return [required(path)]
    name = str(value)
    if any(not " " <= ch <= "~" or ch == "=" for ch in name):
        return [invalid(path, name, ENV_NAME_MESSAGE)]
    return []


def no_backsteps(value: str, path: str) -> list[FieldError]:
    if ".." in value.split("/"):
        return [invalid(path, value, "must not contain '..'")]
    return []


def descending_path(value: str, path: str) -> list[FieldError]:
    """Relative, and no `..` element: a path that stays inside the directory it is joined to."""
    errors = [invalid(path, value, "must be a relative path")] if value.startswith("/") else []
    return errors + no_backsteps(value, path)


def non_reserved_path(value: str, path: str) -> list[FieldError]:
    """A volume's file: a descending path that does not start with `..` either (kubelet's own `..data`)."""
    errors = descending_path(value, path)
    if value.startswith("..") and not value.startswith("../"):
        errors.append(invalid(path, value, "must not start with '..'"))
    return errors
