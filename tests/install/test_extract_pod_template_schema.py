"""hack/extract_pod_template_schema.py on a small hand-written OpenAPI document (no Go needed)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "extract_pod_template_schema.py"


@pytest.fixture(scope="module")
def extract() -> ModuleType:
    spec = importlib.util.spec_from_file_location("extract_pod_template_schema", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INTSTR = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
DOCUMENT: dict[str, Any] = {
    "components": {
        "schemas": {
            "io.k8s.api.core.v1.PodTemplateSpec": {
                "description": "PodTemplateSpec describes a pod. More info: https://example.invalid",
                "type": "object",
                "properties": {
                    "metadata": {"allOf": [ref(META)], "default": {}, "description": "Standard metadata."},
                    "spec": {"allOf": [ref("Spec")], "default": {}},
                },
            },
            META: {
                "type": "object",
                "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
                    "annotations": {
                        "type": "object",
                        "additionalProperties": {"type": "string", "default": ""},
                    },
                    "managedFields": {"type": "array", "items": {"type": "object"}},
                },
            },
            "Spec": {
                "description": "Spec. Second sentence.",
                "type": "object",
                "required": ["ports"],
                "x-kubernetes-unions": [{"discriminator": "x"}],
                "properties": {
                    "ports": {
                        "type": "array",
                        "items": {"allOf": [ref("Port")], "default": {}},
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["port", "protocol"],
                        "x-kubernetes-patch-merge-key": "port",
                    },
                    "limits": {
                        "type": "object",
                        "additionalProperties": {"allOf": [ref(QUANTITY)], "default": {}},
                    },
                    "target": {"allOf": [ref(INTSTR)], "description": "Port number or name."},
                    "loop": {"allOf": [ref("Spec")]},
                    "count": {"type": "integer", "format": "int32", "default": 0},
                },
            },
            "Port": {
                "type": "object",
                "required": ["port"],
                "properties": {
                    "port": {"type": "integer", "format": "int32", "default": 0},
                    "protocol": {"type": "string", "default": "TCP", "description": "Protocol for port."},
                },
            },
            QUANTITY: {"oneOf": [{"type": "string"}, {"type": "number"}], "description": "Quantity."},
            INTSTR: {"oneOf": [{"type": "integer"}, {"type": "string"}], "format": "int-or-string"},
        }
    }
}


def test_conversion_is_structural_and_keeps_what_crds_need(extract: ModuleType) -> None:
    schema = extract.extract(DOCUMENT)
    assert schema["description"] == "PodTemplateSpec describes a pod."
    meta = schema["properties"]["metadata"]
    assert meta["description"] == "Standard metadata."
    assert meta["x-kubernetes-preserve-unknown-fields"] is True
    assert set(meta["properties"]) == {"labels", "annotations"}
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["ports"]
    assert "x-kubernetes-unions" not in spec and "default" not in spec
    ports = spec["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["port", "protocol"]
    assert "x-kubernetes-patch-merge-key" not in ports
    # The non-required list-map key keeps its default (the apiserver requires one); nothing else does.
    assert ports["items"]["properties"]["protocol"]["default"] == "TCP"
    assert "default" not in ports["items"]["properties"]["port"]
    assert "default" not in spec["properties"]["count"]
    limit = spec["properties"]["limits"]["additionalProperties"]
    assert limit["x-kubernetes-int-or-string"] is True and limit["pattern"] == extract.QUANTITY_PATTERN
    assert limit["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    target = spec["properties"]["target"]
    assert target == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "description": "Port number or name.",
    }
    # A reference cycle is cut, not followed forever.
    assert spec["properties"]["loop"]["x-kubernetes-preserve-unknown-fields"] is True


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        ("Required.", "Required."),
        (
            "Image pull policy. One of Always, Never, IfNotPresent. Defaults to Always.",
            "Image pull policy. One of Always, Never, IfNotPresent.",
        ),
        (
            "Name of the container, e.g. main. Cannot be updated.",
            "Name of the container, e.g. main. Cannot be updated.",
        ),
        ("Lifetime of the volume More info: https://example.invalid/x", "Lifetime of the volume"),
        (
            "First paragraph that is long enough to stand alone.\n\nSecond paragraph.",
            "First paragraph that is long enough to stand alone.",
        ),
    ],
)
def test_first_sentence(extract: ModuleType, text: str, summary: str) -> None:
    assert extract.first_sentence(text) == summary
