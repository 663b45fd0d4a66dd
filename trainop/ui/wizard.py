"""The creation wizard's form: which fields it has, the job they make, and at which field a message goes.

A form can start from one of the packaged examples (`trainop.examples`): its fields are filled from the
example's job, and the job the form makes is the example's with the form's values written over it, so
what the form has no field for (env, volumes, mounts) is kept; the ConfigMap holding the example's
scripts goes with the job (`Form.companions`).

A message of the admission code or of the apiserver names a field path
(`spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image`); `field_of` turns it into the
form field it is about (`Worker.image`), so the message shows where the user typed the value.
"""

from __future__ import annotations

import copy
import re
import shlex
from dataclasses import dataclass
from functools import cache

import yaml

from trainop import examples
from trainop.extensions import EXTENSIONS
from trainop.extensions.faces import WizardField
from trainop.frameworks import KINDS, kind_info
from trainop.install.schema import schema_errors
from trainop.jsontypes import Json
from trainop.ui.runs import check

RUN_POLICY = ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished")
CLEAN_POLICIES = ("", "None", "Running", "All")
RESOURCES = (("cpu", "cpu"), ("memory", "memory"), ("gpu", "nvidia.com/gpu"))
LIMIT_KEYS = frozenset(key for _, key in RESOURCES)
FORM = "form"  # where a message that names no form field goes
# The kind the wizard starts with: the first in the kind picker.
DEFAULT_KIND = sorted(KINDS)[0]
_REPLICA = re.compile(r"^spec\.\w+\[(\w+)\]\.?(.*)$")


@dataclass(frozen=True)
class Example:
    name: str
    kind: str
    description: str
    job: Json
    companions: tuple[Json, ...]  # the other documents: the ConfigMap with the scripts


@cache
def _example(name: str) -> Example:
    found = examples.example(name)
    documents = [d for d in yaml.safe_load_all(found.document) if isinstance(d, dict)]
    job = next(d for d in documents if d.get("kind") == found.kind)
    others = tuple(d for d in documents if d is not job)
    return Example(found.name, found.kind, found.description, job, others)


def examples_of(kind: str) -> list[Example]:
    """The packaged examples of `kind`, for the wizard to offer."""
    return [e for e in map(_example, examples.names()) if e.kind == kind]


@dataclass(frozen=True)
class Form:
    values: dict[str, str]

    @classmethod
    def initial(cls, kind: str = DEFAULT_KIND, example: str = "") -> Form:
        if example in examples.names():
            return cls.of_example(example)
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

    @classmethod
    def of_example(cls, name: str) -> Form:
        """The form filled from the example's job: every value the form has a field for."""
        found = _example(name)
        job = found.job
        info = kind_info(found.kind)
        meta = job.get("metadata") or {}
        values = {
            "kind": found.kind,
            "example": name,
            "name": str(meta.get("name") or ""),
            "namespace": str(meta.get("namespace") or "default"),
        }
        for rtype, spec in ((job.get("spec") or {}).get(info.replica_field) or {}).items():
            values[f"{rtype}.replicas"] = str(spec.get("replicas", 1))
            if spec.get("restartPolicy"):
                values[f"{rtype}.restartPolicy"] = str(spec["restartPolicy"])
            containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or [{}]
            container = containers[0]
            values[f"{rtype}.image"] = str(container.get("image") or "")
            values[f"{rtype}.command"] = shlex.join(str(w) for w in container.get("command") or [])
            limits = (container.get("resources") or {}).get("limits") or {}
            for field, key in RESOURCES:
                if key in limits:
                    values[f"{rtype}.{field}"] = str(limits[key])
        # The extensions' fields (an accelerator profile per replica type), from their annotations.
        for ext in EXTENSIONS:
            values |= ext.form_values(meta.get("annotations") or {}, info.replica_types)
        run_policy = (job.get("spec") or {}).get("runPolicy") or {}
        for key in (*RUN_POLICY, "cleanPodPolicy"):
            if key in run_policy:
                values[key] = str(run_policy[key])
        if run_policy.get("suspend"):
            values["suspend"] = "on"
        return cls(values)

    @property
    def kind(self) -> str:
        kind = self.values.get("kind", "")
        return kind if kind in KINDS else DEFAULT_KIND

    @property
    def example(self) -> Example | None:
        """The example the form started from; only one of the form's kind (a new kind starts over)."""
        name = self.values.get("example", "")
        if name not in examples.names():
            return None
        found = _example(name)
        return found if found.kind == self.kind else None

    def get(self, name: str) -> str:
        return self.values.get(name, "")

    def companions(self, job: Json) -> list[Json]:
        """What must be applied with `job`: the example's ConfigMap, in the job's namespace."""
        found = self.example
        if found is None:
            return []
        out = []
        for doc in copy.deepcopy(list(found.companions)):
            doc.setdefault("metadata", {})["namespace"] = job["metadata"]["namespace"]
            out.append(doc)
        return out

    def job(self) -> tuple[Json, dict[str, list[str]]]:
        """The job the form describes, and the messages about values that are not even of the right type.

        Starting from an example, each replica type's spec, container and run policy are the example's
        with the form's fields written over them (a field left empty removes that value)."""
        info = kind_info(self.kind)
        found = self.example
        base: Json = copy.deepcopy(found.job) if found else {}
        base_specs = (base.get("spec") or {}).get(info.replica_field) or {}
        problems: dict[str, list[str]] = {}
        specs: Json = {}
        for rtype in info.replica_types:
            raw = self.get(f"{rtype}.replicas").strip()
            if not raw:
                continue
            replicas = _number(raw, f"{rtype}.replicas", problems)
            spec = base_specs.get(rtype) or {}
            template = spec.get("template") or {}
            pod_spec = template.get("spec") or {}
            containers = list(pod_spec.get("containers") or [{}])
            first = containers[0]
            container: Json = {
                "name": first.get("name") or info.default_container,
                "image": self.get(f"{rtype}.image").strip(),
            }
            command = self.get(f"{rtype}.command").strip()
            if command:
                try:
                    container["command"] = shlex.split(command)
                except ValueError as exc:
                    problems.setdefault(f"{rtype}.command", []).append(f"cannot split into words: {exc}")
            resources = dict(first.get("resources") or {})
            limits = {k: v for k, v in (resources.get("limits") or {}).items() if k not in LIMIT_KEYS}
            limits |= {
                key: self.get(f"{rtype}.{field}").strip()
                for field, key in RESOURCES
                if self.get(f"{rtype}.{field}").strip()
            }
            resources.pop("limits", None)
            if limits:
                resources = {"limits": limits, **resources}
            if resources:
                container["resources"] = resources
            # The rest of the example's container; a command or limits the form emptied stay removed.
            container |= {k: v for k, v in first.items() if k not in (*container, "command", "resources")}
            out: Json = {"replicas": replicas if replicas is not None else raw}
            policy = self.get(f"{rtype}.restartPolicy")
            if policy:
                out["restartPolicy"] = policy
            out |= {k: v for k, v in spec.items() if k not in ("replicas", "restartPolicy", "template")}
            out["template"] = {
                **template,
                "spec": {**pod_spec, "containers": [container, *containers[1:]]},
            }
            specs[rtype] = out
        run_policy: Json = {
            k: v
            for k, v in ((base.get("spec") or {}).get("runPolicy") or {}).items()
            if k not in (*RUN_POLICY, "cleanPodPolicy", "suspend")
        }
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
        spec_out |= {
            k: v for k, v in (base.get("spec") or {}).items() if k not in (info.replica_field, "runPolicy")
        }
        if run_policy:
            spec_out["runPolicy"] = run_policy
        metadata: Json = {
            "name": self.get("name").strip(),
            "namespace": self.get("namespace").strip() or "default",
        }
        metadata |= {k: v for k, v in (base.get("metadata") or {}).items() if k not in metadata}
        # The extensions' fields replace the example's annotations of theirs.
        annotations = dict(metadata.get("annotations") or {})
        for ext in EXTENSIONS:
            annotations, messages_of = ext.form_annotations(
                annotations, self.values, info.replica_types, list(specs)
            )
            for name, messages in messages_of.items():
                problems.setdefault(name, []).extend(messages)
        metadata.pop("annotations", None)
        if annotations:
            metadata["annotations"] = annotations
        job: Json = {
            "apiVersion": "kubeflow.org/v1",
            "kind": info.kind,
            "metadata": metadata,
            "spec": spec_out,
        }
        if not specs:
            problems.setdefault(FORM, []).append("give at least one replica type a number of replicas")
        return job, problems


def form_fields(kind: str) -> list[str]:
    """Every field of the form for `kind`, as named in the form."""
    per_type = (
        "replicas",
        "image",
        "command",
        "restartPolicy",
        *(f for f, _ in RESOURCES),
        *(f.name for f in extension_fields()),
    )
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
    for ext in EXTENSIONS:
        found = ext.form_field(path)
        if found is not None:
            return found
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


def extension_fields() -> list[WizardField]:
    """The fields the extensions add for every replica type (an accelerator profile and its count)."""
    return [f for ext in EXTENSIONS for f in ext.wizard_fields()]


def extension_choices() -> list[tuple[WizardField, list[tuple[str, str]] | None]]:
    """Each extension field with its choices now (None for a field without), for the form to show."""
    return [(f, f.choices() if f.choices is not None else None) for f in extension_fields()]
