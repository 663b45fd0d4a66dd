"""Parsing Metacontroller's hook request into what `sync` needs, with one-line reasons for bad input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.kinds import KINDS
from hooks.times import is_timestamp

Json = dict[str, Any]


class BadRequest(ValueError):
    """The request cannot be a Metacontroller hook call; the message says which field is wrong."""


@dataclass(frozen=True)
class HookRequest:
    parent: Json
    children: dict[str, dict[str, Json]]
    finalizing: bool


def parse(body: Any) -> HookRequest:
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object with `parent` and `children`")
    parent = body.get("parent")
    if not isinstance(parent, dict):
        raise BadRequest("`parent` must be the job object")
    kind = parent.get("kind")
    if kind not in KINDS:
        raise BadRequest(f"parent.kind {kind!r} is not one of {', '.join(KINDS)}")
    meta = parent.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise BadRequest("parent.metadata.name must be a non-empty string")
    raw_children = body.get("children") or {}
    if not isinstance(raw_children, dict):
        raise BadRequest("`children` must be an object keyed by `<Kind>.<apiVersion>`")
    children: dict[str, dict[str, Json]] = {}
    for key, group in raw_children.items():
        if group is None:
            group = {}
        if not isinstance(group, dict):
            raise BadRequest(f"children[{key!r}] must be an object keyed by child name")
        for name, obj in group.items():
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
                raise BadRequest(f"children[{key!r}][{name!r}] must be a Kubernetes object with metadata")
            if not isinstance(obj["metadata"].get("name"), str):
                raise BadRequest(f"children[{key!r}][{name!r}].metadata.name must be a string")
        children[str(key)] = group
    finalizing = body.get("finalizing", False)
    if not isinstance(finalizing, bool):
        raise BadRequest("`finalizing` must be true or false")
    return HookRequest(parent=_with_sane_status(parent), children=children, finalizing=finalizing)


def _with_sane_status(parent: Json) -> Json:
    """Drop status fields of the wrong shape: only another writer can corrupt them, and a 400 would
    make Metacontroller retry forever instead of letting the hook rebuild them."""
    status = parent.get("status")
    if not isinstance(status, dict):
        return {**parent, "status": {}}
    shapes: dict[str, type] = {
        "conditions": list,
        "replicaStatuses": dict,
        "startTime": str,
        "completionTime": str,
        "lastReconcileTime": str,
        "podRestarts": dict,
        "observedGeneration": int,
    }
    clean: dict[str, Any] = {k: v for k, v in status.items() if k in shapes and isinstance(v, shapes[k])}
    if "conditions" in clean:
        clean["conditions"] = [
            c for c in clean["conditions"] if isinstance(c, dict) and isinstance(c.get("type"), str)
        ]
    for key in ("replicaStatuses", "podRestarts"):
        if key in clean:
            clean[key] = {k: v for k, v in clean[key].items() if isinstance(v, dict)}
    for key in ("startTime", "completionTime"):
        if key in clean and not is_timestamp(clean[key]):
            del clean[key]
    return {**parent, "status": clean}
