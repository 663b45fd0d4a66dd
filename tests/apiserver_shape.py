"""Children exactly as dense as the apiserver returns them: tests/realistic.py's pods and Services with
managedFields written the way the apiserver writes fieldsV1.

tests/realistic.py gives every list one `{}` leaf in managedFields; the apiserver keys each item of an
associative list (`k:{"name":"pytorch"}`, `k:{"type":"Ready"}`, ...) and lists every field of it, and
the scheduler's status write has an entry of its own. A pod read back from a cluster is therefore denser
in JSON containers than realistic.py's: these are the bodies the hook's bound is measured against.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tests import realistic
from trainop.jsontypes import Json

# The merge keys of the associative lists in a pod and a Service (core/v1's patchMergeKey / listMapKeys).
MERGE_KEYS = ("name", "uid", "type", "ip", "mountPath", "containerPort", "port", "devicePath", "key")


def fields_v1(obj: Any) -> Any:
    """fieldsV1 of `obj` as the apiserver writes it: `f:` fields, `.` for a set map, `k:` list items."""
    if isinstance(obj, dict):
        return {f"f:{k}": _member(v) for k, v in obj.items()}
    return {}


def _member(value: Any) -> Any:
    if isinstance(value, dict):
        return {".": {}, **fields_v1(value)} if value else {}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out: Json = {".": {}}
        for item in value:
            key = {k: item[k] for k in MERGE_KEYS if k in item and not isinstance(item[k], dict)}
            if "containerPort" in key:
                key["protocol"] = item.get("protocol", "TCP")
            out["k:" + json.dumps(key, separators=(",", ":"), sort_keys=True)] = {".": {}, **fields_v1(item)}
        return out
    return {}


def _entry(manager: str, fields: Json, subresource: str | None = None) -> Json:
    entry: Json = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": realistic.STARTED,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _with_managed_fields(obj: Json, desired: Json) -> Json:
    written = {k: v for k, v in desired.items() if k not in ("apiVersion", "kind", "status")}
    entries = [_entry("metacontroller", fields_v1(written))]
    status = obj.get("status") or {}
    if obj["kind"] == "Pod":
        scheduled = [c for c in status.get("conditions", []) if c["type"] == "PodScheduled"]
        kubelet = {**status, "conditions": [c for c in status.get("conditions", []) if c not in scheduled]}
        entries.append(_entry("kube-scheduler", fields_v1({"status": {"conditions": scheduled}}), "status"))
        entries.append(_entry("kubelet", fields_v1({"status": kubelet}), "status"))
    obj["metadata"]["managedFields"] = entries
    return obj


def observed(
    desired: list[Json], owner: Json, phase: str = "Running", first_index: int = 0
) -> dict[str, dict[str, Json]]:
    """Metacontroller's `children` for `desired`, each as the apiserver returns it (see the module); the
    uids count from `first_index`, so children observed later can join earlier ones."""
    out: dict[str, dict[str, Json]] = {}
    for index, child in enumerate(desired, start=first_index):
        if child["kind"] == "Pod":
            obj = realistic.pod(child, index, owner, phase)
        elif child["kind"] == "Service":
            obj = realistic.service(child, index, owner)
        else:
            obj = copy.deepcopy(child)
            obj["metadata"] = realistic._metadata(child, index, owner)
        _with_managed_fields(obj, child)
        out.setdefault(f"{obj['kind']}.{obj['apiVersion']}", {})[obj["metadata"]["name"]] = obj
    return out
