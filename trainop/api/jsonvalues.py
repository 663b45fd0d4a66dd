"""JSON hygiene for everything we hand to Metacontroller."""

from __future__ import annotations

from typing import Any

import orjson

# orjson (and Go's int64 on Metacontroller's side) cannot carry a larger integer: such a float stays one.
INT64_LIMIT = 2.0**63


def clean(value: Any) -> Any:
    """Drop None everywhere and turn whole floats into ints: either makes Metacontroller loop."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [clean(v) for v in value if v is not None]
    if isinstance(value, float) and value.is_integer() and abs(value) < INT64_LIMIT:
        return int(value)
    return value


def copy_json(value: Any) -> Any:
    """A deep copy of plain JSON data, an order of magnitude faster than copy.deepcopy."""
    return orjson.loads(orjson.dumps(value))
