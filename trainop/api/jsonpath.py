"""Reading a path through JSON that may have any shape (objects from users, other writers or fuzzers)."""

from __future__ import annotations

from typing import Any


def dig(obj: Any, *path: str) -> Any:
    """The value at `path`, or None where any step is missing or not an object."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj
