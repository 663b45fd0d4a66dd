"""What both HTTP edges check about a request body before any recursive code sees it."""

from __future__ import annotations

from typing import Any

# A Kubernetes object nests ~20 levels (a pod template with affinity terms is among the deepest). The
# bound keeps hostile nesting away from recursive copies and diffs, which would otherwise hit Python's
# recursion limit (~1000 frames).
MAX_DEPTH = 100


class BadRequest(ValueError):
    """The body is not a call this server can answer; the message is one line, for an HTTP 400."""


def deeper_than(value: Any, limit: int) -> bool:
    """Whether a JSON value nests objects or arrays more than `limit` levels, found without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
