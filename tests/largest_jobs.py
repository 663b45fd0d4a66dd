"""The largest job of every kind that admission accepts, and its sync body once every child exists.

Each job has one of each leading replica type and as many Workers as validation admits (MAX_REPLICAS,
or the most that keep its children within MAX_CHILDREN_BYTES), with tests/realistic.py's template
(GPUs, a volume, env); its body observes every pod Running and every Service as the apiserver returns
them (tests/apiserver_shape.py). The hook must sync all of them (docs/limits.md).
"""

from __future__ import annotations

from datetime import datetime

import orjson

from tests import apiserver_shape
from tests.builders import job
from tests.realistic import training_replica
from trainop.admission.admit import admit
from trainop.admission.validation import MAX_REPLICAS
from trainop.controller.sync import sync
from trainop.frameworks import KINDS
from trainop.job.settings import Settings
from trainop.jsontypes import Json

# The replica types each kind's largest job has one of; the rest of its pods are Workers.
LEADERS: dict[str, tuple[str, ...]] = {
    "TFJob": ("Chief",),
    "PyTorchJob": ("Master",),
    "XGBoostJob": ("Master",),
    "MPIJob": ("Launcher",),
    "PaddleJob": ("Master",),
    "JAXJob": (),
    "MXJob": ("Scheduler", "Server"),
}
assert set(LEADERS) == set(KINDS)
NAMESPACE = "team-a"


def realistic_job(kind: str, workers: int, namespace: str = NAMESPACE) -> Json:
    """tests/realistic.py's training job for any kind: its leaders and `workers` Workers."""
    spec = training_replica(kind)
    types: dict[str, Json | int] = {t: spec for t in LEADERS[kind]}
    types["Worker"] = {**spec, "replicas": workers}
    out = job(kind, name="bench", namespace=namespace, **types)
    out["metadata"]["uid"] = "6f1c2d7e-0000-4000-8000-000000000001"
    return out


def admissible(obj: Json) -> bool:
    return admit(obj).checks.ok


def most_workers(kind: str, namespace: str = NAMESPACE) -> int:
    """The most Workers admission accepts in `realistic_job(kind, ..., namespace)`: the namespace is in
    every address the kinds' environments list, so it moves the bound."""
    if admissible(realistic_job(kind, MAX_REPLICAS, namespace)):
        return MAX_REPLICAS
    lo, hi = 1, MAX_REPLICAS  # admissible(lo), not admissible(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if admissible(realistic_job(kind, mid, namespace)) else (lo, mid)
    return lo


def largest_job(kind: str, namespace: str = NAMESPACE) -> Json:
    return realistic_job(kind, most_workers(kind, namespace), namespace)


def resync_body(parent: Json, now: datetime, children_of: Json | None = None) -> bytes:
    """Metacontroller's resync of `parent` with every child of `children_of` (default: `parent`) observed
    as the apiserver returns it and every pod Running, the status the one the hook wrote; syncs until the
    hook desires no child more (MPI's launcher comes once its workers run)."""
    source = children_of or parent
    status: Json = {}
    observed: dict[str, dict[str, Json]] = {}
    for _ in range(4):
        result = sync({**source, "status": status}, observed, Settings(), now)
        status = result.status
        new = [c for c in result.children if c["metadata"]["name"] not in observed.get(_key(c), {})]
        if not new:
            break
        count = sum(len(group) for group in observed.values())
        for key, group in apiserver_shape.observed(new, source, first_index=count).items():
            observed.setdefault(key, {}).update(group)
    return orjson.dumps({"parent": {**parent, "status": status}, "children": observed})


def _key(child: Json) -> str:
    return f"{child['kind']}.{child['apiVersion']}"
