"""Strategic merge of a TrainJob's runtimePatches into its runtime's JobSet spec.

Trainer merges each patch with Kubernetes' strategic merge patch over the typed JobSetSpec, so the
result depends on the Go types' patch tags: lists keyed by a field merge item by item, every other
list is replaced whole, maps merge and a null deletes. The keys below are those tags for every list
a JobSet spec holds (docs/trainer-v2.md#runtime-patches). Patches reach us pruned by the CRD schema,
so no `$patch`/`$retainKeys` directive can be in one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from trainop.jsontypes import Json

# Field name -> merge key (None: a list of scalars merged as a set). Within a JobSet spec each of these
# names means one Go field, so the name alone picks the strategy.
MERGE_KEYS: Mapping[str, str | None] = {
    "replicatedJobs": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "ownerReferences": "uid",
    "finalizers": None,
}


def merge(original: Json, patch: Json) -> Json:
    """``original`` with ``patch`` merged in; neither argument is changed."""
    return _merge_map(original, patch)


def _merge_map(original: Mapping[str, Any], patch: Mapping[str, Any]) -> Json:
    out: Json = copy.deepcopy(dict(original))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif key in MERGE_KEYS and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_list(out[key], value, MERGE_KEYS[key])
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge_map(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _identity(item: Any, key: str | None) -> Any:
    value = item if key is None else (item.get(key) if isinstance(item, dict) else None)
    # Identities are compared and hashed; a list or object (never valid, but possible) by its JSON text.
    return value if isinstance(value, str | int | float | bool | None) else json.dumps(value, sort_keys=True)


def _merge_list(original: list[Any], patch: list[Any], key: str | None) -> list[Any]:
    server_order = [_identity(o, key) for o in original]
    patched: dict[Any, Any] = {}
    for p in patch:
        ident = _identity(p, key)
        if key is None:
            patched[ident] = p
            continue
        base = patched.get(ident)
        if base is None and ident in server_order:
            base = original[server_order.index(ident)]
        patched[ident] = (
            _merge_map(base, p) if isinstance(base, dict) and isinstance(p, dict) else copy.deepcopy(p)
        )
    server_only = [o for o, ident in zip(original, server_order, strict=True) if ident not in patched]
    return _interleave(server_only, list(patched.items()), server_order, key)


def _interleave(
    server_only: Sequence[Any], patched: Sequence[tuple[Any, Any]], server_order: list[Any], key: str | None
) -> list[Any]:
    # The apiserver's order: a server-only item goes before a patched one only when both were in the
    # original list and it came first there; an item new in the patch goes before the server-only rest.
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patched):
        if j >= len(patched):
            out.append(copy.deepcopy(server_only[i]))
            i += 1
        elif i >= len(server_only):
            out.append(patched[j][1])
            j += 1
        else:
            left = server_order.index(_identity(server_only[i], key))
            right = server_order.index(patched[j][0]) if patched[j][0] in server_order else -1
            if right >= 0 and left < right:
                out.append(copy.deepcopy(server_only[i]))
                i += 1
            else:
                out.append(patched[j][1])
                j += 1
    return out
