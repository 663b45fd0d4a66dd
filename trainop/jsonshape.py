"""What both HTTP edges check about a request body before any recursive code sees it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# A Kubernetes object nests ~20 levels (a pod template with affinity terms is among the deepest). The
# bound keeps hostile nesting away from recursive copies and diffs, which would otherwise hit Python's
# recursion limit (~1000 frames).
MAX_DEPTH = 100


class BadRequest(ValueError):
    """The body is not a call this server can answer; the message is one line, for an HTTP 400."""


def deeper_than(value: Any, limit: int) -> bool:
    """Whether a JSON value nests objects or arrays more than `limit` levels, found without recursion.

    The stack holds one iterator per level, so a wide array costs no more memory than a narrow one."""
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        node = next(stack[-1], _DONE)
        if node is _DONE:
            stack.pop()
        elif isinstance(node, dict | list):
            if len(stack) > limit:
                return True
            stack.append(iter(node.values() if isinstance(node, dict) else node))
    return False


_DONE = object()
