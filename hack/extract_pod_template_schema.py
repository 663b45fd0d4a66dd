#!/usr/bin/env python3
"""Extract core/v1 PodTemplateSpec from Kubernetes' own OpenAPI document as a CRD-ready schema.

Source: `api/openapi-spec/v3/api__v1_openapi.json` of the Go module `k8s.io/kubernetes@v1.36.3` (the
document a kube-apiserver of that version serves at `/openapi/v3/api/v1`). Output:
`trainop/install/schemas/pod_template_spec.json`, checked in, so neither the CRD generator nor the tests
need Go.

Regenerate (needs Go and the Go module proxy; the module is ~40 MB and usually already in the module cache):

    python hack/extract_pod_template_schema.py            # finds or downloads the module
    python hack/extract_pod_template_schema.py --openapi path/to/api__v1_openapi.json
    trainop crds --write                                   # then rebuild the CRDs that embed it

The built-in document is not a valid CRD schema as it stands. The conversion, roughly what
controller-gen does for embedded core types:
- every `$ref` (also inside `allOf: [{$ref}]` wrappers) is inlined; the wrapper's description wins;
- Quantity and IntOrString become `x-kubernetes-int-or-string: true` with `anyOf: [integer, string]`
  (Quantity keeps controller-gen's pattern);
- ObjectMeta becomes `type: object` + `x-kubernetes-preserve-unknown-fields: true`, because the
  apiserver only validates and prunes metadata at the root of a custom resource; only `labels` and
  `annotations` stay typed (string maps), the fields a template's metadata is there for;
- `default` is dropped except on list-map keys the apiserver requires to be defaulted (`protocol: TCP`),
  since a CRD default is persisted and the built-in zero-value defaults (`""`, `{}`) would bloat every job;
- Kubernetes-internal extensions (patch strategy, unions) are dropped; list/map types and `required` kept;
- descriptions are cut to their first sentence to keep each CRD well below etcd's object size limit;
- a reference cycle, or nesting deeper than MAX_DEPTH, is cut with preserve-unknown-fields (v1.36 has none).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from trainop.jsontypes import Json

K8S_MODULE = "k8s.io/kubernetes"
K8S_VERSION = "v1.36.3"
DOCUMENT = "api/openapi-spec/v3/api__v1_openapi.json"
ROOT = "io.k8s.api.core.v1.PodTemplateSpec"
OUTPUT = Path(__file__).resolve().parent.parent / "trainop" / "install" / "schemas" / "pod_template_spec.json"
MAX_DEPTH = 24
# Summaries shorter than this take the next sentence too: "Image pull policy." says less than the enum.
SHORT_SUMMARY = 40

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# The ObjectMeta fields a pod template's metadata is validated on; the rest is preserved as written.
EMBEDDED_META_FIELDS = ("annotations", "labels")
TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
# controller-gen's pattern for resource.Quantity, so the apiserver rejects "1 Gi" at create time.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# JSONSchemaProps fields we carry over; anything else in the built-in document has no CRD meaning.
KEPT_SCALARS = ("type", "format", "enum", "x-kubernetes-list-type", "x-kubernetes-map-type")
CRD_FORMATS = {"int32", "int64", "date-time", "byte", "double", "float"}


# A sentence ends at a period followed by whitespace or the end, but not in "e.g." / "i.e." / "etc.".
_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)(?<!etc)\.(?=\s|$)")
_MORE_INFO = re.compile(r"\s*More info:.*$")


def first_sentence(text: str) -> str:
    """The first sentence, plus the next ones while it is too short to say much ("Required.")."""
    paragraph = " ".join(text.strip().split("\n\n", 1)[0].split())
    summary, start = "", 0
    for match in _SENTENCE_END.finditer(paragraph):
        sentence = paragraph[start : match.end()].strip()
        start = match.end()
        if sentence.startswith("More info:"):
            break
        summary = f"{summary} {sentence}".strip()
        if len(summary) >= SHORT_SUMMARY:
            return summary
    rest = paragraph[start:].strip()
    if rest and len(summary) < SHORT_SUMMARY:
        summary = f"{summary} {rest}".strip()
    # Some sentences run into their link without a period ("... lifetime More info: https://...").
    return _MORE_INFO.sub("", summary)


def int_or_string(description: str | None, pattern: str | None = None) -> Json:
    node: Json = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
    if pattern:
        node["pattern"] = pattern
    if description:
        node["description"] = description
    return node


class Converter:
    def __init__(self, schemas: Json) -> None:
        self.schemas = schemas

    def convert(self, node: Json, stack: tuple[str, ...] = ()) -> Json:
        description = node.get("description")
        ref = _ref_of(node)
        if ref is not None:
            return self._convert_ref(ref, description, stack)
        out: Json = {}
        if description:
            out["description"] = first_sentence(description)
        for key in KEPT_SCALARS:
            if key in node:
                out[key] = node[key]
        if out.get("format") not in CRD_FORMATS:
            out.pop("format", None)
        if "properties" in node:
            out["properties"] = {name: self.convert(prop, stack) for name, prop in node["properties"].items()}
            required = [name for name in node.get("required", ()) if name in out["properties"]]
            if required:
                out["required"] = required
        if "items" in node:
            out["items"] = self.convert(node["items"], stack)
        if isinstance(node.get("additionalProperties"), dict):
            out["additionalProperties"] = self.convert(node["additionalProperties"], stack)
        if node.get("x-kubernetes-list-type") == "map":
            out["x-kubernetes-list-map-keys"] = list(node["x-kubernetes-list-map-keys"])
            self._default_map_keys(node, out)
        if "type" not in out:
            raise ValueError(f"schema without type after conversion: {sorted(node)}")
        return out

    def _convert_ref(self, ref: str, description: str | None, stack: tuple[str, ...]) -> Json:
        target = self.schemas[ref]
        text = first_sentence(description or target.get("description", ""))
        if ref in (QUANTITY, INT_OR_STRING):
            return int_or_string(text, QUANTITY_PATTERN if ref == QUANTITY else None)
        if ref == TIME:
            return _with_description({"type": "string", "format": "date-time"}, text)
        if ref == OBJECT_META:
            # Typing labels and annotations as well rejects `team: yes` (a YAML boolean) when the job is
            # created, instead of failing every pod creation later.
            known = {name: self.convert(target["properties"][name], stack) for name in EMBEDDED_META_FIELDS}
            meta = {"type": "object", "properties": known, "x-kubernetes-preserve-unknown-fields": True}
            return _with_description(meta, text)
        if ref in stack or len(stack) >= MAX_DEPTH:
            return _with_description({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, text)
        converted = self.convert(target, (*stack, ref))
        return _with_description(converted, text)

    def _default_map_keys(self, node: Json, out: Json) -> None:
        """List-map keys must be required or defaulted in a CRD; carry the built-in default over."""
        items_in = self._resolve(node["items"])
        items_out = out["items"]
        for key in out["x-kubernetes-list-map-keys"]:
            if key in items_out.get("required", ()):
                continue
            default = items_in["properties"][key].get("default")
            if default is None:
                raise ValueError(f"list-map key {key!r} is neither required nor defaulted")
            items_out["properties"][key]["default"] = default

    def _resolve(self, node: Json) -> Json:
        ref = _ref_of(node)
        return self.schemas[ref] if ref is not None else node


def _ref_of(node: Json) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    all_of = node.get("allOf")
    if all_of:
        if len(all_of) != 1 or "$ref" not in all_of[0]:
            raise ValueError(f"unsupported allOf: {all_of}")
        return str(all_of[0]["$ref"]).rsplit("/", 1)[-1]
    return None


def _with_description(node: Json, text: str) -> Json:
    if text:
        node = {**node, "description": text}
    return node


def locate_document() -> Path:
    """The document inside the module cache, downloading the module through the Go proxy if needed."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    cache = subprocess.run(["go", "env", "GOMODCACHE"], env=env, check=True, capture_output=True, text=True)
    cached = Path(cache.stdout.strip()) / f"{K8S_MODULE}@{K8S_VERSION}" / DOCUMENT
    if cached.is_file():
        return cached
    # `go mod download` outside a module needs a scratch directory; it prints the module's Dir as JSON.
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            ["go", "mod", "download", "-json", f"{K8S_MODULE}@{K8S_VERSION}"],
            cwd=scratch,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    return Path(json.loads(result.stdout)["Dir"]) / DOCUMENT


def extract(document: Json) -> Json:
    schemas = document["components"]["schemas"]
    return Converter(schemas).convert(schemas[ROOT], (ROOT,))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument(
        "--openapi", type=Path, help=f"path to {DOCUMENT} (default: from the Go module cache)"
    )
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    path: Path = args.openapi or locate_document()
    raw = path.read_bytes()
    data = {
        "source": {
            "module": f"{K8S_MODULE}@{K8S_VERSION}",
            "path": DOCUMENT,
            "schema": ROOT,
            "sha256": hashlib.sha256(raw).hexdigest(),
            "generator": "hack/extract_pod_template_schema.py",
        },
        "schema": extract(json.loads(raw)),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.output} ({args.output.stat().st_size} bytes) from {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
