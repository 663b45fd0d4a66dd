"""Differences between two normalised snapshots, as readable paths.

Objects become ``a.b.c`` paths; lists of objects that carry a key become ``[key]`` steps (``name``
for containers, env, ports, volumes...; ``type`` for conditions), so a reordered list is no difference
and a changed item is named; lists of scalars (args, command, events) are compared as sets of items
when they are ``events``/``eventSources``/``otherEvents`` and as whole values otherwise. An absent side
is ``ABSENT``.
Top-level keys starting with ``_`` carry context for the verdict and are not compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ABSENT = "<absent>"
LIST_KEYS = ("name", "type", "containerPort", "mountPath", "key", "path")
SET_LISTS = ("events", "eventSources", "otherEvents")


@dataclass(frozen=True)
class Difference:
    case: str
    checkpoint: str
    path: str
    kubeflow: Any
    trainop: Any

    def render(self) -> str:
        return (
            f"{self.case} @ {self.checkpoint}: {self.path}\n"
            f"    kubeflow: {_show(self.kubeflow)}\n"
            f"    trainop:  {_show(self.trainop)}"
        )


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _list_key(items: list[Any]) -> str | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in LIST_KEYS:
        values = [i.get(key) for i in items]
        if all(v is not None for v in values) and len(set(map(str, values))) == len(values):
            return key
    return None


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaf paths of a JSON value (see the module docstring)."""
    if isinstance(value, dict):
        if not value:
            return {path: {}}
        out: dict[str, Any] = {}
        for k, v in value.items():
            step = f"{path}.{k}" if path and "/" not in k else (f"{path}[{k}]" if path else k)
            out.update(flatten(v, step))
        return out
    if isinstance(value, list):
        last = path.rsplit(".", 1)[-1]
        if last in SET_LISTS:
            return {f"{path}[{item}]": "present" for item in value} or {path: []}
        key = _list_key(value)
        if key is None:
            return {path: value}
        out = {}
        for item in value:
            out.update(flatten({k: v for k, v in item.items() if k != key}, f"{path}[{item[key]}]") or {})
        return out
    return {path: value}


def diff(case: str, checkpoint: str, kubeflow: dict[str, Any], trainop: dict[str, Any]) -> list[Difference]:
    """Differences between two snapshots; a child that exists on one side only is one difference."""
    out: list[Difference] = []
    left_children, right_children = kubeflow.get("children") or {}, trainop.get("children") or {}
    for name in sorted(set(left_children) ^ set(right_children)):
        present = "present"
        out.append(Difference(case, checkpoint, f"children[{name}]",
                              present if name in left_children else ABSENT,
                              present if name in right_children else ABSENT))  # fmt: skip
    shared = set(left_children) & set(right_children)

    def common(snap: dict[str, Any]) -> dict[str, Any]:
        children = snap.get("children") or {}
        compared = {k: v for k, v in snap.items() if not k.startswith("_")}
        return {**compared, "children": {k: v for k, v in children.items() if k in shared}}

    left, right = flatten(common(kubeflow)), flatten(common(trainop))
    for path in sorted(set(left) | set(right)):
        lv, rv = left.get(path, ABSENT), right.get(path, ABSENT)
        if lv != rv:
            out.append(Difference(case, checkpoint, path, lv, rv))
    return out
