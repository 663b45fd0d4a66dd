"""Kubeflow Trainer v2's three CustomResourceDefinitions (trainer.kubeflow.org/v1alpha1), generated from
the models of trainop.trainjob.models.

The models say the API's shape and carry the CRD facts a Python type cannot (`crd=`: lengths, defaults,
CEL rules, list types). The Kubernetes and JobSet types inside (env vars, resources, volumes, the JobSet
spec of a runtime's template) come from JobSet's own CRD, extracted into
trainop/install/schemas/jobset_spec.json by hack/extract_jobset_schema.py, so they are rendered as
controller-gen renders them. The result accepts and refuses what Trainer v2.3.0's CRDs do
(docs/trainer-v2.md#crds lists the one difference and why).
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from trainop.install.crds import schema_file
from trainop.install.manifests import LABELS
from trainop.jsontypes import Json
from trainop.trainjob import constants as c
from trainop.trainjob import models

# pydantic's JSON-schema keys that are CRD facts as they stand.
CARRIED = (
    "default",
    "enum",
    "format",
    "maxItems",
    "maxLength",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "pattern",
)
KUBE, MODEL, ITEMS, EMPTY = "trainop:kube", "trainop:model", "trainop:items", "trainop:empty"
PRINTER_COLUMNS: tuple[Json, ...] = (
    {"jsonPath": ".status.conditions[-1:].type", "name": "State", "type": "string"},
    {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
)
NAME_RULES: tuple[Json, ...] = (
    {"message": "metadata.name must match RFC 1035 DNS label format",
     "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"},
    {"message": "metadata.name must be no more than 63 characters", "rule": "size(self.metadata.name) <= 63"},
)  # fmt: skip


def _jobset_data() -> Json:
    return schema_file("jobset_spec.json")


def jobset_spec_schema() -> Json:
    """JobSet v1alpha2's spec as its CRD has it (a fresh copy)."""
    return copy.deepcopy(_jobset_data()["schema"])


def kube_schema(path: str) -> Json:
    """The schema node at a dotted path under the JobSet spec; `items` steps into a list."""
    node = _jobset_data()["schema"]
    for step in path.split(".") if path else ():
        node = node["items"] if step == "items" else node["properties"][step]
    return copy.deepcopy(node)


class _Converter:
    """pydantic's JSON schema of one model -> a structural CRD schema, `$defs` resolved inline."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.root = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        self.defs: Json = self.root.pop("$defs", {})

    def convert(self, node: Json) -> Json:
        if "$ref" in node:
            out = self.convert(self.defs[node["$ref"].rsplit("/", 1)[-1]])
        elif KUBE in node:
            out = kube_schema(node[KUBE])
        elif MODEL in node:
            out = model_schema(getattr(models, node[MODEL]))
        elif EMPTY in node:
            out = {"type": "object"}
        elif "anyOf" in node:
            # Optional[X] says "may be absent"; a CRD says that by not requiring it.
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            if len(options) != 1:
                raise ValueError(f"no structural form for anyOf {node['anyOf']}")
            out = self.convert(options[0])
        elif node.get("type") == "object":
            out = self._object(node)
        elif node.get("type") == "array":
            out = {"type": "array", "items": self.convert(node["items"])}
        elif node.get("type") in ("string", "integer", "boolean", "number"):
            out = {"type": node["type"]}
        else:
            raise ValueError(f"no structural form for {node}")
        return self._facts(node, out)

    def _facts(self, node: Json, out: Json) -> Json:
        for key in CARRIED:
            if node.get(key) is not None:
                out[key] = copy.deepcopy(node[key])
        for key, value in node.items():
            if key.startswith("x-kubernetes-"):
                out[key] = copy.deepcopy(value)
        if ITEMS in node:
            out["items"].update(copy.deepcopy(node[ITEMS]))
        if node.get("description"):
            out["description"] = node["description"]
        return out

    def _object(self, node: Json) -> Json:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if properties:
            out: Json = {"type": "object", "properties": {k: self.convert(v) for k, v in properties.items()}}
            if node.get("required"):
                out["required"] = sorted(node["required"])
            return out
        if isinstance(extra, dict) and extra:
            return {"type": "object", "additionalProperties": self.convert(extra)}
        raise ValueError(f"an untyped object needs crd=kube(...), model(...) or an empty marker: {node}")


def model_schema(model: type[BaseModel]) -> Json:
    root = _Converter(model)
    return root.convert(root.root)


def _root(description: str, spec: Json, status: Json | None = None) -> Json:
    properties: Json = {
        "apiVersion": {
            "description": "APIVersion defines the versioned schema of this object.",
            "type": "string",
        },
        "kind": {"description": "Kind is the REST resource this object represents.", "type": "string"},
        "metadata": {"type": "object"},
        "spec": spec,
    }
    if status is not None:
        properties["status"] = status
    return {"description": description, "type": "object", "properties": properties}


def trainjob_schema() -> Json:
    spec = model_schema(models.TrainJobSpec)
    spec["description"] = "What to train: the runtime to start from, and what this job changes in it."
    status = model_schema(models.TrainJobStatus)
    status["description"] = "Observed state of the TrainJob."
    schema = _root(
        "TrainJob is a training job run from a TrainingRuntime or ClusterTrainingRuntime.", spec, status
    )
    schema["x-kubernetes-validations"] = [dict(rule) for rule in NAME_RULES]
    return schema


def runtime_schema(kind: str) -> Json:
    spec = model_schema(models.TrainingRuntimeSpec)
    spec["description"] = "The runtime: its ML policy, its gang-scheduling policy and its JobSet template."
    spec["minProperties"] = 1
    scope = "cluster-wide" if kind == "ClusterTrainingRuntime" else "in one namespace"
    return _root(f"{kind} is a blueprint of training jobs {scope}, a JobSet template and a policy.", spec)


def _crd(kind: str, plural: str, scope: str, schema: Json, status: bool) -> Json:
    version: Json = {
        "name": c.VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
    }
    if status:
        version["additionalPrinterColumns"] = [dict(col) for col in PRINTER_COLUMNS]
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{c.GROUP}", "labels": dict(LABELS)},
        "spec": {
            "group": c.GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [version],
        },
    }


def trainer_crds() -> list[Json]:
    """TrainJob, TrainingRuntime and ClusterTrainingRuntime."""
    return [
        _crd("TrainJob", "trainjobs", "Namespaced", trainjob_schema(), status=True),
        _crd("TrainingRuntime", "trainingruntimes", "Namespaced", runtime_schema("TrainingRuntime"), False),
        _crd(
            "ClusterTrainingRuntime",
            "clustertrainingruntimes",
            "Cluster",
            runtime_schema("ClusterTrainingRuntime"),
            False,
        ),
    ]


def schema_of(crd: Json) -> Any:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
