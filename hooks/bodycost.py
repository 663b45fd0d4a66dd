"""What a Metacontroller sync body may cost in memory, judged against the job it carries, before parsing it.

A sync body is the job (`parent`, after the CompositeController) and every child Metacontroller
observed. The children are what makes a body large, and what they can cost follows from the job: its
replica counts say how many pods and Services it has (the kind's and the extensions' other children are
a few more), its templates what each pod holds. So the body's cost is estimated from its raw bytes
(trainop.jsoncost), the job alone is parsed from its head, and everything after the job may cost at most
what the job's children can cost as the apiserver returns them (CHILD_COST, OBSERVED_FACTOR), with
COST_FLOOR to spare; above that, or above the server's parse budget, the body is refused with a 413
before it is parsed. docs/limits.md states the rule and what a client sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hooks.request import TRAINJOB
from trainop.admission import validation
from trainop.admission.admit import defaulted
from trainop.frameworks import FRAMEWORKS
from trainop.jsoncost import COST_FLOOR, MAX_COST_PER_BYTE, TooCostly, leading_member, parse_cost

MIB = 1024 * 1024
# The job must end within the body's first bytes: the apiserver stores objects of at most 1.5 MiB (etcd's
# request limit), and Metacontroller sends the CompositeController (a few KiB) before it.
HEAD_LIMIT = 4 * MIB
# What one observed pod costs (trainop.jsoncost's estimate) beyond its template and generated parts:
# the pod's own fields, the apiserver's defaults, the ServiceAccount token volume, a full status with
# conditions and containerStatuses, and the kubelet's and scheduler's managedFields. Measured on
# tests/apiserver_shape.py's pods: ~65 KiB; twice that.
CHILD_COST = 128 * 1024
# A Service, as the apiserver returns it (~17 KiB measured, the kind's ports and managedFields), twice.
SERVICE_COST = 32 * 1024
# How many times its template and generated parts an observed pod holds them: its spec (1), the
# last-applied annotation Metacontroller writes (1, as a string, estimated as JSON) and managedFields'
# fieldsV1 of them (every field again as `"f:<name>":{}`, every list item as a `k:` object: at most ~4
# times the estimate of the field itself). Measured ~5 on tests/apiserver_shape.py's pods; 8.
OBSERVED_FACTOR = 8
# The kind's other children (MPI's ConfigMap and RBAC, an HPA), a PodGroup, the extensions' (a
# TensorBoard Deployment and Service, the JSON-logs ConfigMap): at most this many, each within
# CHILD_COST besides what the framework generates for it.
EXTRA_CHILDREN = 8
# A body may observe this many times the children its job implies (and EXTRA_CHILDREN more): more
# than one sync's worth of pods being replaced, fewer than an attack needs to take a worker's time.
CHILDREN_FACTOR = 2


@dataclass(frozen=True)
class Allowance:
    """What the children of one job may be: how many, and their estimated parse cost."""

    children: int
    cost: int


def body_cost(data: bytes, most: int) -> int:
    """The estimated parse cost of a sync body; TooCostly (for a 413) above `most`, the worker's whole
    parse budget: such a body could never be parsed beside anything else."""
    cost = parse_cost(data)
    if cost > most:
        raise TooCostly(
            f"the body's {len(data)} bytes would take ~{cost} bytes parsed, more than the {most} bytes "
            "this server parses at once"
        )
    return cost


def check_children(data: bytes, cost: int) -> Allowance | None:
    """Above COST_FLOOR, the Allowance of the body's job; TooCostly (for a 413) when the job cannot be
    read from the body's head, or what follows it costs more than the job's children can. The caller
    holds `cost` (body_cost) in its budget first: reading the head takes at most that."""
    if cost <= COST_FLOOR:
        return None
    head = leading_member(data, "parent", ("controller",), HEAD_LIMIT)
    if head is None:
        raise TooCostly(
            f"the body's {len(data)} bytes would take ~{cost >> 20} MiB parsed, over the "
            f"{COST_FLOOR >> 20} MiB a body may take before its job says what its children may: the job "
            f"(`parent`, first or after `controller`, as Metacontroller sends it) must end within its "
            f"first {HEAD_LIMIT >> 20} MiB"
        )
    parent, end = head
    allowance = children_allowance(parent)
    rest = parse_cost(data, end)
    if rest > allowance.cost + COST_FLOOR:
        raise TooCostly(
            f"the children of {_name(parent)} would take ~{rest >> 20} MiB parsed, more than the "
            f"~{(allowance.cost + COST_FLOOR) >> 20} MiB its {allowance.children} children can take as "
            "the apiserver returns them"
        )
    return allowance


def too_many_children(parent: Any, observed: int, allowance: Allowance) -> str | None:
    """Why `observed` children are far more than the job implies (for a 413), or None."""
    most = CHILDREN_FACTOR * allowance.children + EXTRA_CHILDREN
    if observed <= most:
        return None
    return (
        f"the body holds {observed} children, more than the {most} that {_name(parent)} can have "
        f"({CHILDREN_FACTOR} x its {allowance.children} and {EXTRA_CHILDREN} more)"
    )


# A TrainJob observes its JobSet and its runtime snapshot, and is sent its runtime: three objects of at most
# what the apiserver stores (1.5 MiB), each observed with managedFields and Metacontroller's last-applied
# annotation (about twice its size), at the densest cost per byte.
TRAINJOB_OBJECT_MAX = 3 * MIB
TRAINJOB_ALLOWANCE_OBJECTS = 3


def children_allowance(parent: Any) -> Allowance:
    """How many children the job `parent` implies and what they may cost as Metacontroller observes them.

    Per replica type the pods are the larger of the spec's replicas and the pods the status last counted
    (after a scale-down the old pods are observed until they are gone), at most MAX_REPLICAS. A job the
    hook cannot read implies no children (the sync refuses or fails it, and answers with none)."""
    kind = parent.get("kind") if isinstance(parent, dict) else None
    if kind == TRAINJOB:
        objects = TRAINJOB_ALLOWANCE_OBJECTS
        return Allowance(objects, objects * TRAINJOB_OBJECT_MAX * MAX_COST_PER_BYTE)
    fw = FRAMEWORKS.get(kind) if isinstance(kind, str) else None
    if fw is None:
        return Allowance(0, 0)
    try:
        job = defaulted(parent)[0]
        parts = validation.implied_parts(fw, job, parse_cost)
    except Exception:  # a job validation refuses; the sync reports why
        return Allowance(EXTRA_CHILDREN, EXTRA_CHILDREN * CHILD_COST)
    counted = _status_pods(job)
    children, cost = EXTRA_CHILDREN, EXTRA_CHILDREN * CHILD_COST + OBSERVED_FACTOR * parts.extra
    for rtype, (replicas, size) in parts.replicas.items():
        pods = min(max(replicas, counted.get(rtype, 0)), validation.MAX_REPLICAS)
        services = pods if fw.has_services else 0
        children += pods + services
        cost += pods * (CHILD_COST + OBSERVED_FACTOR * size) + services * SERVICE_COST
    return Allowance(children, cost)


def _status_pods(job: Any) -> dict[str, int]:
    statuses = (job.get("status") or {}).get("replicaStatuses")
    if not isinstance(statuses, dict):
        return {}
    out: dict[str, int] = {}
    for rtype, status in statuses.items():
        if isinstance(status, dict):
            counts = [status.get(k) for k in ("active", "succeeded", "failed")]
            out[str(rtype)] = sum(n for n in counts if isinstance(n, int) and n > 0)
    return out


def _name(parent: Any) -> str:
    meta = parent.get("metadata") if isinstance(parent, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    kind = parent.get("kind") if isinstance(parent, dict) else None
    return f"{kind} {meta.get('namespace')}/{meta.get('name')}"
