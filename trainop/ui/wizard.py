"""The creation wizard's form: which fields it has, the job they make, and at which field a message goes.

A message of the admission code or of the apiserver names a field path
(`spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image`); `field_of` turns it into the
form field it is about (`Worker.image`), so the message shows where the user typed the value.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from trainop.frameworks import KINDS, kind_info
from trainop.install.schema import schema_errors
from trainop.ui.runs import check

Json = dict[str, Any]

RUN_POLICY = ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished")
CLEAN_POLICIES = ("", "None", "Running", "All")
RESOURCES = (("cpu", "cpu"), ("memory", "memory"), ("gpu", "nvidia.com/gpu"))
FORM = "form"  # where a message that names no form field goes
# The kind the wizard starts with: the first in the kind picker.
DEFAULT_KIND = sorted(KINDS)[0]
_REPLICA = re.compile(r"^spec\.\w+\[(\w+)\]\.?(.*)$")


@dataclass(frozen=True)
class Form:
    values: dict[str, str]

    @classmethod
    def initial(cls, kind: str = DEFAULT_KIND) -> Form:
        info = kind_info(kind if kind in KINDS else DEFAULT_KIND)
        worker = info.worker_type
        values = {
            "kind": info.kind,
            "name": "my-job",
            "namespace": "default",
            f"{worker}.replicas": "1",
            f"{worker}.image": "python:3.11",
            f"{worker}.command": "python3 -c \"print('hello')\"",
        }
        for rtype in info.required_types:
            values.setdefault(f"{rtype}.replicas", "1")
            values.setdefault(f"{rtype}.image", "python:3.11")
            values.setdefault(f"{rtype}.command", "python3 -c \"print('hello')\"")
        return cls(values)

    @property
    def kind(self) -> str:
        kind = self.values.get("kind", "")
        return kind if kind in KINDS else DEFAULT_KIND

    def get(self, name: str) -> str:
        return self.values.get(name, "")

    def job(self) -> tuple[Json, dict[str, list[str]]]:
        """The job the form describes, and the messages about values that are not even of the right type."""
        info = kind_info(self.kind)
        problems: dict[str, list[str]] = {}
        specs: Json = {}
        for rtype in info.replica_types:
            raw = self.get(f"{rtype}.replicas").strip()
            if not raw:
                continue
            replicas = _number(raw, f"{rtype}.replicas", problems)
            container: Json = {"name": info.default_container, "image": self.get(f"{rtype}.image").strip()}
            command = self.get(f"{rtype}.command").strip()
            if command:
                try:
                    container["command"] = shlex.split(command)
                except ValueError as exc:
                    problems.setdefault(f"{rtype}.command", []).append(f"cannot split into words: {exc}")
            limits = {
                key: self.get(f"{rtype}.{field}").strip()
                for field, key in RESOURCES
                if self.get(f"{rtype}.{field}").strip()
            }
            if limits:
                container["resources"] = {"limits": limits}
            spec: Json = {"replicas": replicas if replicas is not None else raw}
            policy = self.get(f"{rtype}.restartPolicy")
            if policy:
                spec["restartPolicy"] = policy
            spec["template"] = {"spec": {"containers": [container]}}
            specs[rtype] = spec
        run_policy: Json = {}
        for key in RUN_POLICY:
            raw = self.get(key).strip()
            if raw:
                number = _number(raw, key, problems)
                run_policy[key] = number if number is not None else raw
        if self.get("cleanPodPolicy"):
            run_policy["cleanPodPolicy"] = self.get("cleanPodPolicy")
        if self.get("suspend") == "on":
            run_policy["suspend"] = True
        spec_out: Json = {info.replica_field: specs}
        if run_policy:
            spec_out["runPolicy"] = run_policy
        job: Json = {
            "apiVersion": "kubeflow.org/v1",
            "kind": info.kind,
            "metadata": {
                "name": self.get("name").strip(),
                "namespace": self.get("namespace").strip() or "default",
            },
            "spec": spec_out,
        }
        if not specs:
            problems.setdefault(FORM, []).append("give at least one replica type a number of replicas")
        return job, problems


def form_fields(kind: str) -> list[str]:
    """Every field of the form for `kind`, as named in the form."""
    per_type = ("replicas", "image", "command", "restartPolicy", *(f for f, _ in RESOURCES))
    types = kind_info(kind).replica_types
    return [
        "name",
        "namespace",
        *(f"{t}.{f}" for t in types for f in per_type),
        *RUN_POLICY,
        "cleanPodPolicy",
    ]


def _number(raw: str, name: str, problems: dict[str, list[str]]) -> int | None:
    try:
        return int(raw)
    except ValueError:
        problems.setdefault(name, []).append(f"must be a whole number, not {raw!r}")
        return None


def field_of(path: str) -> str:
    """The form field a message about `path` belongs at; FORM when the form has no such field."""
    if path in ("metadata.name", "metadata.namespace"):
        return path.split(".")[1]
    if path.startswith("spec.runPolicy."):
        key = path.removeprefix("spec.runPolicy.").split(".")[0]
        return key if key in (*RUN_POLICY, "cleanPodPolicy", "suspend") else FORM
    match = _REPLICA.match(path)
    if not match:
        return FORM
    rtype, rest = match.groups()
    if rest in ("replicas", "restartPolicy"):
        return f"{rtype}.{rest}"
    for field in ("image", "command"):
        if rest.endswith(f".{field}") or f".{field}[" in rest:
            return f"{rtype}.{field}"
    for field, key in RESOURCES:
        if "resources" in rest and key in rest:
            return f"{rtype}.{field}"
    return f"{rtype}.replicas" if not rest else FORM


def errors_by_field(job: Json, problems: dict[str, list[str]]) -> dict[str, list[str]]:
    """Every message about the job, keyed by form field: typing problems first, then what the schema and
    the admission code (the validating webhook's own checks) say."""
    out = {k: list(v) for k, v in problems.items()}
    found = [(e.path, e.detail) for e in schema_errors(job)] if not problems else []
    found += check(job) if not found else []
    for path, message in found:
        where = field_of(path)
        out.setdefault(where, []).append(message if where != FORM else f"{path}: {message}")
    return out
