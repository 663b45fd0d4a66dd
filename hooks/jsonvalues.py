"""JSON hygiene for everything we hand to Metacontroller."""

from __future__ import annotations

import math
from typing import Any

import orjson


def clean(value: Any) -> Any:
    """Drop None everywhere and turn whole floats into ints: either makes Metacontroller loop."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [clean(v) for v in value if v is not None]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def copy_json(value: Any) -> Any:
    """A deep copy of plain JSON data, an order of magnitude faster than copy.deepcopy."""
    return orjson.loads(orjson.dumps(value))
