"""The seven kubeflow.org/v1 CustomResourceDefinitions, generated from the kind table and the API models.

`trainop crds` prints them as one multi-document YAML stream. `trainop crds --write` regenerates every
generated install file: the CRDs in manifests/crds/ and charts/trainop/crds/, plus the kind-dependent
manifests of trainop.install.manifests. `trainop crds --check` exits 1 and lists the files that differ.

The schemas are structural (every node typed, no `$ref`, no nullable `anyOf`), so the apiserver prunes
and validates jobs, and `kubectl explain` reaches into the pod templates. The PodTemplateSpec schema is
trainop/install/schemas/pod_template_spec.json, extracted from Kubernetes' own OpenAPI document by
hack/extract_pod_template_schema.py; this module only reads that file, so it needs no Go.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from trainop.api.constants import GROUP, VERSION
from trainop.api.kinds import KindInfo
from trainop.api.models import JobStatus
from trainop.frameworks import KINDS, framework
from trainop.install.manifests import GENERATED_HEADER, LABELS, dump_yaml, generated_manifests
from trainop.jsontypes import Json

CATEGORIES = ("kubeflow",)
CRD_DIRS = ("manifests/crds", "charts/trainop/crds")
CRD_KUSTOMIZATION = "manifests/crds/Kustomization"
# CRD-only facts the pydantic models cannot express (docs/design.md#crd-facts), by property path under `spec`.
SPEC_EXTRAS: Mapping[tuple[str, ...], Json] = {
    ("runPolicy", "suspend"): {"default": False},
    ("runPolicy", "schedulingPolicy", "queue"): {
        "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "spec.runPolicy.schedulingPolicy.queue is immutable"}
        ]
    },
}
PRINTER_COLUMNS: tuple[Json, ...] = (
    {"jsonPath": ".status.conditions[-1:].type", "name": "State", "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
)
PRESERVE: Json = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
INT_OR_STRING: Json = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
# Keys whose list order is meaningful; every other list in a schema (`required`) is sorted.
ORDERED_LISTS = frozenset({"anyOf", "enum", "x-kubernetes-list-map-keys", "x-kubernetes-validations"})


@functools.cache
def schema_file(name: str) -> Json:
    """One of the checked-in schema files of trainop/install/schemas/ (`source` and `schema`), parsed once."""
    text = resources.files("trainop.install").joinpath(f"schemas/{name}").read_text()
    data: Json = json.loads(text)
    return data


def _pod_template_data() -> Json:
    return schema_file("pod_template_spec.json")


def pod_template_schema() -> Json:
    """core/v1 PodTemplateSpec as a structural schema (a fresh copy: callers may edit it)."""
    return copy.deepcopy(_pod_template_data()["schema"])


def pod_template_source() -> Json:
    """Where the pod template schema came from (module, path, sha256)."""
    return dict(_pod_template_data()["source"])


class _ModelSchema:
    """pydantic's JSON schema -> structural OpenAPI v3, resolving `$defs` inline."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.root = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        self.defs: Json = self.root.pop("$defs", {})

    def convert(self, node: Json | None = None) -> Json:
        node = self.root if node is None else node
        description = node.get("description")
        if "$ref" in node:
            target = self.defs[node["$ref"].rsplit("/", 1)[-1]]
            return _describe(self.convert(target), description)
        if "anyOf" in node:
            # Optional[X] is how pydantic says "may be absent"; a CRD says that by not requiring it.
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            if len(options) == 1:
                return _describe(self.convert(options[0]), description)
            if sorted(o.get("type", "") for o in options) == ["integer", "string"]:
                return _describe(copy.deepcopy(INT_OR_STRING), description)
            raise ValueError(f"no structural form for anyOf {node['anyOf']}")
        kind = node.get("type")
        out: Json
        if kind == "object":
            out = self._object(node)
        elif kind == "array":
            out = {"type": "array", "items": self.convert(node["items"])}
        elif kind in ("string", "integer", "boolean", "number"):
            out = {"type": kind}
        else:
            raise ValueError(f"no structural form for {node}")
        return _describe(out, description)

    def _object(self, node: Json) -> Json:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if properties:
            out: Json = {"type": "object", "properties": {k: self.convert(v) for k, v in properties.items()}}
            if node.get("required"):
                out["required"] = list(node["required"])
            return out
        if isinstance(extra, dict) and extra:
            return {"type": "object", "additionalProperties": self.convert(extra)}
        # dict[str, Any]: a Kubernetes type we do not model (MetricSpec, LabelSelector); keep it as written.
        return copy.deepcopy(PRESERVE)


def _describe(node: Json, description: str | None) -> Json:
    if description:
        node["description"] = description
    return node


def _property(schema: Json, path: Sequence[str]) -> Json:
    """The schema node at a property path; "*" steps into a map's values."""
    node = schema
    for step in path:
        node = node["additionalProperties"] if step == "*" else node["properties"][step]
    return node


def _sorted(node: Any, key: str = "") -> Any:
    """Sort schema keys (and lists whose order carries no meaning) so output never depends on field order."""
    if isinstance(node, dict):
        if key == "properties":
            return {name: _sorted(node[name]) for name in sorted(node)}
        return {k: _sorted(node[k], k) for k in sorted(node)}
    if isinstance(node, list):
        items = [_sorted(item) for item in node]
        if key not in ORDERED_LISTS and all(isinstance(i, str) for i in items):
            return sorted(items)
        return items
    return node


def spec_schema(info: KindInfo) -> Json:
    schema = _ModelSchema(framework(info.kind).spec_model).convert()
    template = _property(schema, (info.replica_field, "*", "template"))
    replaced = pod_template_schema()
    replaced["description"] = template.get("description", replaced.get("description", ""))
    _property(schema, (info.replica_field, "*"))["properties"]["template"] = replaced
    for path, extra in SPEC_EXTRAS.items():
        _property(schema, path).update(copy.deepcopy(extra))
    _name_replica_types(info, _property(schema, (info.replica_field,)))
    if info.replica_field not in schema.get("required", ()):
        raise ValueError(f"{info.kind}: spec must require {info.replica_field}")
    return schema


def _name_replica_types(info: KindInfo, replica_map: Json) -> None:
    """Give each canonical replica type its own property, so `kubectl explain` can walk
    `spec.<map>.Worker.template.spec.containers` (it cannot step through a map key).

    Unknown keys are preserved rather than pruned: defaulting moves `worker` to `Worker` and validation
    rejects unknown types with a message, where pruning would drop them silently. Only `Worker` keeps the
    pod template's descriptions; the other copies carry the same schema without them, because the CRD is
    one etcd object (1.5 MiB) and TFJob/MXJob would otherwise need five or six full copies.
    """
    value = replica_map.pop("additionalProperties")
    replica_map["properties"] = {
        rtype: {
            **(copy.deepcopy(value) if rtype == info.worker_type else without_descriptions(value)),
            "description": f"The {rtype} replicas: their count, pod template and restart policy.",
        }
        for rtype in info.replica_types
    }
    replica_map["x-kubernetes-preserve-unknown-fields"] = True


def without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [without_descriptions(v) for v in node]
    return node


def status_schema() -> Json:
    schema = _ModelSchema(JobStatus).convert()
    schema["description"] = "Observed state of the job, written by the sync hook through Metacontroller."
    # Metacontroller adds observedGeneration to whatever status the hook returns
    # (docs/design.md#status-write-and-observedgeneration).
    schema["properties"]["observedGeneration"] = {
        "type": "integer",
        "format": "int64",
        "description": "The metadata.generation the status was computed from (written by Metacontroller).",
    }
    # The hook keeps its bookkeeping in status to stay stateless; a field pruned by the apiserver would
    # differ on every sync and make Metacontroller write the status in a loop, so unknown fields stay.
    schema["x-kubernetes-preserve-unknown-fields"] = True
    return schema


def openapi_schema(info: KindInfo) -> Json:
    schema: Json = _sorted(
        {
            "description": f"{info.kind} is a {info.framework} training job (Kubeflow Training Operator v1).",
            "type": "object",
            "properties": {
                "apiVersion": {
                    "description": "APIVersion defines the versioned schema of this object.",
                    "type": "string",
                },
                "kind": {
                    "description": "Kind is the REST resource this object represents.",
                    "type": "string",
                },
                "metadata": {"type": "object"},
                "spec": spec_schema(info),
                "status": status_schema(),
            },
        }
    )
    return schema


def subresources(info: KindInfo) -> Json:
    result: Json = {"status": {}}
    if info.scalable:
        result["scale"] = {
            "labelSelectorPath": f".status.replicaStatuses.{info.worker_type}.selector",
            "specReplicasPath": f".spec.{info.replica_field}.{info.worker_type}.replicas",
            "statusReplicasPath": f".status.replicaStatuses.{info.worker_type}.active",
        }
    return result


def crd(info: KindInfo) -> Json:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{info.plural}.{GROUP}", "labels": dict(LABELS)},
        "spec": {
            "group": GROUP,
            "names": {
                "categories": list(CATEGORIES),
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": [dict(c) for c in PRINTER_COLUMNS],
                    "schema": {"openAPIV3Schema": openapi_schema(info)},
                    "subresources": subresources(info),
                }
            ],
        },
    }


def crds() -> list[Json]:
    return [crd(info) for info in KINDS.values()]


@functools.cache
def crd_yaml(kind: str) -> str:
    """One CRD as YAML; cached because dumping ~400 KB of YAML is the slow part of every caller."""
    return dump_yaml(crd(KINDS[kind]))


def crd_filename(info: KindInfo) -> str:
    return f"{GROUP}_{info.plural}.yaml"


def generated_files() -> dict[str, str]:
    """Repository-relative path -> content of every file `--write` produces."""
    files: dict[str, str] = {}
    names = []
    for info in KINDS.values():
        text = GENERATED_HEADER + crd_yaml(info.kind)
        names.append(crd_filename(info))
        for directory in CRD_DIRS:
            files[f"{directory}/{crd_filename(info)}"] = text
    # Named `Kustomization` (a name kustomize also recognises) rather than kustomization.yaml so that
    # `kubectl apply -f manifests/crds/` still works: kubectl -f skips files without a YAML extension and
    # would otherwise fail on a Kustomization object it cannot map.
    files[CRD_KUSTOMIZATION] = GENERATED_HEADER + dump_yaml(
        {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": names}
    )
    files.update(generated_manifests())
    return files


def _stale(root: Path, expected: Mapping[str, str]) -> Iterator[str]:
    """Generated-looking files no generator produces any more (a kind was renamed or removed)."""
    for directory in CRD_DIRS:
        for path in sorted((root / directory).glob("*.yaml")):
            rel = path.relative_to(root).as_posix()
            if rel not in expected:
                yield rel


def differing(root: Path) -> list[str]:
    expected = generated_files()
    changed = [
        rel
        for rel, text in expected.items()
        if not (root / rel).is_file() or (root / rel).read_text() != text
    ]
    return changed + list(_stale(root, expected))


def write(root: Path) -> list[str]:
    expected = generated_files()
    stale = list(_stale(root, expected))
    for rel in stale:
        (root / rel).unlink()
    written = []
    for rel, text in expected.items():
        path = root / rel
        if path.is_file() and path.read_text() == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(rel)
    return written + stale


def _default_root() -> Path:
    # A source checkout holds pyproject.toml next to trainop/; an installed package writes relative to cwd.
    checkout = Path(__file__).resolve().parents[2]
    return checkout if (checkout / "pyproject.toml").is_file() else Path.cwd()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--write",
        action="store_true",
        help="regenerate manifests/crds/, charts/trainop/crds/ and the other generated manifests",
    )
    mode.add_argument(
        "--check", action="store_true", help="exit 1 listing generated files that are out of date"
    )
    parser.add_argument("--root", type=Path, default=None, help="repository root (default: this checkout)")


def run(args: argparse.Namespace) -> int:
    root: Path = args.root or _default_root()
    if args.write:
        for rel in write(root):
            print(f"wrote {rel}", file=sys.stderr)
        return 0
    if args.check:
        stale = differing(root)
        for rel in stale:
            print(f"out of date: {rel} (run `trainop crds --write`)", file=sys.stderr)
        return 1 if stale else 0
    sys.stdout.write("".join(f"---\n{crd_yaml(kind)}" for kind in KINDS))
    return 0
