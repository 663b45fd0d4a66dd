"""Checking a job against its CRD's structural schema, the way the apiserver does on a cluster.

On a cluster the apiserver rejects wrong types and kubectl's strict field validation rejects unknown
fields (a `comand:` typo in a container) before any webhook runs. `trainop run` has no apiserver, so it
checks the job against the very schema the CRDs are generated from: nothing in a job is silently ignored.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from trainop.api.checks import FieldError
from trainop.frameworks import kind_info
from trainop.install.crds import openapi_schema
from trainop.jsontypes import Json

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


@cache
def _spec_schema(kind: str) -> Json:
    return dict(openapi_schema(kind_info(kind))["properties"]["spec"])


def schema_errors(job: Json) -> list[FieldError]:
    """Type errors, missing required fields and unknown fields in the job's spec."""
    errors: list[FieldError] = []
    spec = job.get("spec")
    if spec is not None:
        _check(spec, _spec_schema(str(job.get("kind"))), "spec", errors)
    return errors


def _is(value: Any, json_type: str) -> bool:
    # bool is an int in Python but never an integer in JSON.
    if isinstance(value, bool) and json_type != "boolean":
        return False
    return isinstance(value, _TYPES.get(json_type, (object,)))


def _check(value: Any, schema: Json, path: str, errors: list[FieldError]) -> None:
    if value is None:
        return  # an empty YAML value; the apiserver treats it as unset
    if schema.get("x-kubernetes-int-or-string"):
        if not (_is(value, "integer") or _is(value, "string")):
            errors.append(
                FieldError(path, f"Invalid value: {json.dumps(value)}: must be an integer or a string")
            )
        return
    expected = schema.get("type")
    if expected and not _is(value, expected):
        errors.append(FieldError(path, f"Invalid value: {json.dumps(value)}: must be of type {expected}"))
        return
    if isinstance(value, dict):
        _check_object(value, schema, path, errors)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{i}]", errors)
    elif "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' for v in schema["enum"])
        errors.append(FieldError(path, f'Unsupported value: "{value}": supported values: {allowed}'))


def _check_object(value: Json, schema: Json, path: str, errors: list[FieldError]) -> None:
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    open_ended = schema.get("x-kubernetes-preserve-unknown-fields") or not (properties or additional)
    for key, item in value.items():
        if key in properties:
            _check(item, properties[key], f"{path}.{key}", errors)
        elif isinstance(additional, dict):
            _check(item, additional, f"{path}.{key}", errors)
        elif not open_ended:
            errors.append(
                FieldError(f"{path}.{key}", f'unknown field "{key}"; check its spelling and indentation')
            )
    for required in schema.get("required") or ():
        if value.get(required) is None:
            errors.append(FieldError(f"{path}.{required}", "Required value"))
