"""Parsing Metacontroller's hook request into what `sync` needs, with one-line reasons for bad input."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from trainop.api.jsonpath import dig
from trainop.api.times import is_timestamp
from trainop.frameworks import KINDS
from trainop.jsonshape import MAX_DEPTH, BadRequest, deeper_than
from trainop.jsontypes import Json

# The seven v1 kinds, and Trainer v2's TrainJob (trainop.trainjob), whose sync checks its own input.
TRAINJOB = "TrainJob"
PARENT_KINDS = (*KINDS, TRAINJOB)


@dataclass(frozen=True)
class HookRequest:
    parent: Json
    children: dict[str, dict[str, Json]]
    finalizing: bool
    # The objects the customize hook's rules selected (trainop.controller.related), keyed like children.
    related: dict[str, dict[str, Json]] = dataclass_field(default_factory=dict)


@dataclass(frozen=True)
class CustomizeRequest:
    kind: str
    name: str
    namespace: str
    # A TrainJob's related runtime is named in its spec (trainop.trainjob.hook.related_resources).
    parent: Json = dataclass_field(default_factory=dict)


def parse_customize(body: Any) -> CustomizeRequest:
    """Metacontroller's customize request (`controller`, `parent`): only the job's identity is read."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object with `controller` and `parent`")
    parent = _parent(body)
    namespace = parent["metadata"].get("namespace")
    if not isinstance(namespace, str) or not namespace:
        raise BadRequest("parent.metadata.namespace must be a non-empty string")
    return CustomizeRequest(parent["kind"], parent["metadata"]["name"], namespace, parent)


def _parent(body: Json) -> Json:
    parent = body.get("parent")
    if not isinstance(parent, dict):
        raise BadRequest("`parent` must be the job object")
    if deeper_than(parent, MAX_DEPTH):
        # The sync copies the job recursively.
        raise BadRequest(f"`parent` is nested deeper than {MAX_DEPTH} levels")
    kind = parent.get("kind")
    if not isinstance(kind, str) or kind not in PARENT_KINDS:  # `[] in KINDS` would raise TypeError
        raise BadRequest(f"parent.kind {kind!r} is not one of {', '.join(PARENT_KINDS)}")
    meta = parent.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise BadRequest("parent.metadata.name must be a non-empty string")
    problem = _string_maps_problem(meta, "parent.metadata")
    if problem:
        raise BadRequest(problem)
    return parent


def parse(body: Any) -> HookRequest:
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object with `parent` and `children`")
    parent = _parent(body)
    problem = None if parent["kind"] == TRAINJOB else _templates_problem(parent)
    if problem:
        raise BadRequest(problem)
    children = _object_map(body, "children")
    related = _object_map(body, "related")
    finalizing = body.get("finalizing", False)
    if not isinstance(finalizing, bool):
        raise BadRequest("`finalizing` must be true or false")
    if parent["kind"] != TRAINJOB:
        parent = _with_sane_status(parent)
    return HookRequest(parent=parent, children=children, finalizing=finalizing, related=related)


def _object_map(body: Json, which: str) -> dict[str, dict[str, Json]]:
    """`children` or `related`: `<Kind>.<apiVersion>` -> name -> object, every object checked."""
    raw = body.get(which) or {}
    if not isinstance(raw, dict):
        raise BadRequest(f"`{which}` must be an object keyed by `<Kind>.<apiVersion>`")
    out: dict[str, dict[str, Json]] = {}
    for key, group in raw.items():
        if group is None:
            group = {}
        if not isinstance(group, dict):
            raise BadRequest(f"{which}[{key!r}] must be an object keyed by child name")
        for name, obj in group.items():
            if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
                raise BadRequest(f"{which}[{key!r}][{name!r}] must be a Kubernetes object with metadata")
            # The apiserver names every object; an unnamed child cannot be returned as desired.
            child_name = obj["metadata"].get("name")
            if not isinstance(child_name, str) or not child_name:
                raise BadRequest(f"{which}[{key!r}][{name!r}].metadata.name must be a non-empty string")
            problem = _child_shape_problem(obj)
            if problem:
                raise BadRequest(f"{which}[{key!r}][{name!r}].{problem}")
        out[str(key)] = group
    return out


def _with_sane_status(parent: Json) -> Json:
    """Only the status fields the hook writes, of the shape it writes them; the rest is dropped.

    Only another writer can plant or corrupt them, and a 400 would make Metacontroller retry forever
    instead of letting the hook rebuild them. Nothing planted may come back in the answer either: the
    sync and /finalize carry conditions, replica statuses and pod restarts over as they are, so each
    entry keeps only the fields the hook writes (a null or an unknown key could make every sync differ
    from the stored status, or hand another writer's data back as the hook's)."""
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
            {f: n for f, n in cond.items() if f in CONDITION_FIELDS}
            for cond in clean["conditions"]
            if _sane_condition(cond)
        ]
    if "replicaStatuses" in clean:
        # Keyed by the kind's canonical replica types, the only keys the sync writes.
        replica_types = KINDS[parent["kind"]].replica_types
        clean["replicaStatuses"] = {
            k: {
                f: n
                for f, n in v.items()
                if (f == "selector" and isinstance(n, str)) or (f in REPLICA_COUNTS and _count(n))
            }
            for k, v in clean["replicaStatuses"].items()
            if k in replica_types and isinstance(v, dict)
        }
    if "podRestarts" in clean:
        clean["podRestarts"] = {
            k: {f: n for f, n in v.items() if f in ("count", "uid")}
            for k, v in clean["podRestarts"].items()
            if isinstance(v, dict) and _count(v.get("count")) and isinstance(v.get("uid"), str)
        }
    for key in ("startTime", "completionTime"):
        if key in clean and not is_timestamp(clean[key]):
            del clean[key]
    return {**parent, "status": clean}


CONDITION_FIELDS = ("type", "status", "reason", "message", "lastUpdateTime", "lastTransitionTime")
# A replica status's fields besides `selector` (the deprecated `labelSelector` object is never written).
REPLICA_COUNTS = ("active", "succeeded", "failed")


def _sane_condition(cond: Any) -> bool:
    return (
        isinstance(cond, dict)
        and isinstance(cond.get("type"), str)
        and isinstance(cond.get("status"), str)
        and all(isinstance(cond[f], str) for f in CONDITION_FIELDS if f in cond)
    )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# Fields the hook reads from observed children, with the JSON type the apiserver always gives them
# (labels and annotations are checked down to their values, by _string_maps_problem).
_OBJECT_FIELDS: tuple[tuple[str, ...], ...] = (("spec",), ("status",))
_LIST_FIELDS: tuple[tuple[str, ...], ...] = (
    ("metadata", "ownerReferences"),
    ("status", "containerStatuses"),
    ("status", "initContainerStatuses"),
)


def _child_shape_problem(obj: Json) -> str | None:
    """Why an observed child cannot have come from the apiserver, or None."""
    for key in ("apiVersion", "kind"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            return f"{key} must be a string"
    problem = _string_maps_problem(obj["metadata"], "metadata")
    if problem:
        return problem
    for path in _OBJECT_FIELDS:
        value = dig(obj, *path)
        if value is not None and not isinstance(value, dict):
            return f"{'.'.join(path)} must be an object"
    for path in _LIST_FIELDS:
        value = dig(obj, *path)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            return f"{'.'.join(path)} must be a list of objects"
    statuses = [
        *(dig(obj, "status", "containerStatuses") or []),
        *(dig(obj, "status", "initContainerStatuses") or []),
    ]
    for status in statuses:
        count = status.get("restartCount")
        if count is not None and not _count(count):
            return "status.containerStatuses[].restartCount must be a non-negative integer"
        for field in ("state", "lastState"):
            state = status.get(field)
            if state is not None and not (
                isinstance(state, dict) and all(v is None or isinstance(v, dict) for v in state.values())
            ):
                return f"status.containerStatuses[].{field} must be an object of objects"
    return None


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _string_maps_problem(meta: Json, where: str) -> str | None:
    """Why the labels or annotations of `meta` are not a map of strings to strings, or None.

    The apiserver stores no other shape, and the sync uses label values as strings and as dict keys (a
    pod's replica type, its index): a list there made deriving a job's pod events fail with a 500.
    The first offending value is named, so that the 400 says which one to look at."""
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            return f"{where}.{key} must map strings to strings"
        for name, item in value.items():
            if not isinstance(item, str):
                return f"{where}.{key}[{name!r}] must be a string"
    return None


def _templates_problem(parent: Json) -> str | None:
    """Pod-template fields the hook reads, with a type the CRD's PodTemplateSpec schema would have enforced.

    The apiserver never stores such a job; validation (the webhook's) does not look inside templates, so
    without this a hand-made request would make the hook fail with a 500 instead of a clear 400.
    """
    field = KINDS[parent["kind"]].replica_field
    spec = parent.get("spec")
    specs = spec.get(field) if isinstance(spec, dict) else None
    if not isinstance(specs, dict):
        return None  # validation reports it
    for rtype, rspec in specs.items():
        template = rspec.get("template") if isinstance(rspec, dict) else None
        if isinstance(template, dict):
            problem = _template_problem(template)
            if problem:
                return f"parent.spec.{field}[{rtype}].template.{problem}"
    return None


def _template_problem(template: Json) -> str | None:
    meta = template.get("metadata")
    if meta is not None:
        if not isinstance(meta, dict):
            return "metadata must be an object"
        problem = _string_maps_problem(meta, "metadata")
        if problem:
            return problem
    pod = template.get("spec")
    if not isinstance(pod, dict):
        return None  # validation reports it
    for key in ("initContainers", "volumes"):
        if pod.get(key) is not None and not _objects(pod[key]):
            return f"spec.{key} must be a list of objects"
    for key in ("serviceAccountName", "schedulerName"):
        if pod.get(key) is not None and not isinstance(pod[key], str):
            return f"spec.{key} must be a string"
    for group in ("containers", "initContainers"):
        containers = pod.get(group)
        for ctr in containers if isinstance(containers, list) else []:
            if not isinstance(ctr, dict):
                continue  # validation reports it
            problem = _container_problem(ctr)
            if problem:
                return f"spec.{group}[{ctr.get('name')!r}].{problem}"
    return None


def _container_problem(ctr: Json) -> str | None:
    for key in ("env", "ports", "volumeMounts"):
        if ctr.get(key) is not None and not _objects(ctr[key]):
            return f"{key} must be a list of objects"
    for key in ("ports", "env"):
        for item in ctr.get(key) or []:
            if item.get("name") is not None and not isinstance(item["name"], str):
                return f"{key}[].name must be a string"
    for key in ("command", "args"):
        value = ctr.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return f"{key} must be a list of strings"
    resources = ctr.get("resources")
    if resources is None:
        return None
    if not isinstance(resources, dict):
        return "resources must be an object"
    for key in ("limits", "requests"):
        if resources.get(key) is not None and not isinstance(resources[key], dict):
            return f"resources.{key} must be an object"
    # DRA: the names of the pod's resourceClaims this container uses.
    if resources.get("claims") is not None and not _objects(resources["claims"]):
        return "resources.claims must be a list of objects"
    return None
