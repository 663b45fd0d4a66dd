"""Gang scheduling: a PodGroup per job for Volcano, scheduler-plugins or kube-scheduler itself.

The setting (trainop.job.settings) names the scheduler: "volcano", "kubernetes" (kube-scheduler's own
workload-aware scheduling, docs/gang-scheduling.md), or else the scheduler name of scheduler-plugins'
coscheduling, as Kubeflow's `--gang-scheduler-name` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from trainop.api import quantity
from trainop.job.context import JobContext
from trainop.job.gang import KUBERNETES, KUBERNETES_API, PLUGINS, VOLCANO, family
from trainop.jsontypes import Json

VOLCANO_KEY = "PodGroup.scheduling.volcano.sh/v1beta1"
PLUGINS_KEY = "PodGroup.scheduling.x-k8s.io/v1alpha1"
KUBERNETES_KEY = f"PodGroup.{KUBERNETES_API}"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
PLUGINS_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def is_volcano(scheduler: str) -> bool:
    return family(scheduler) == VOLCANO


def child_key(scheduler: str) -> str:
    return {VOLCANO: VOLCANO_KEY, KUBERNETES: KUBERNETES_KEY, PLUGINS: PLUGINS_KEY}[family(scheduler)]


def _policy(ctx: JobContext) -> Json:
    return dict(ctx.run_policy.get("schedulingPolicy") or {})


def min_member(ctx: JobContext) -> int:
    value = _policy(ctx).get("minAvailable")
    return int(value) if isinstance(value, int) else ctx.total_replicas()


def min_resources(ctx: JobContext) -> dict[str, str]:
    """Requests (or limits) of the first `minMember` pods, walking replica types in canonical order."""
    given = _policy(ctx).get("minResources")
    if isinstance(given, dict):
        return {str(k): str(v) for k, v in given.items()}
    totals: dict[str, Decimal] = {}
    remaining = min_member(ctx)
    for rtype in ctx.replica_specs:
        take = min(remaining, ctx.replicas(rtype))
        remaining -= take
        for container in ctx.containers(rtype):
            resources = container.get("resources") or {}
            amounts: Mapping[str, Any] = resources.get("requests") or resources.get("limits") or {}
            for name, value in amounts.items():
                try:
                    amount = quantity.parse(value)
                except ValueError:
                    continue  # the CRD schema does not check quantities; the apiserver rejects the pod itself
                totals[name] = totals.get(name, Decimal(0)) + amount * take
    return {name: quantity.format_quantity(total) for name, total in sorted(totals.items())}


def pod_group(ctx: JobContext, observed: Json | None) -> Json:
    scheduler = ctx.settings.gang_scheduler
    if family(scheduler) == KUBERNETES:
        return _kubernetes_pod_group(ctx)
    policy = _policy(ctx)
    metadata: Json = {"name": ctx.name, "namespace": ctx.namespace}
    annotations = ctx.job["metadata"].get("annotations")
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: Json = {"minMember": min_member(ctx)}
    resources = min_resources(ctx)
    if resources:
        spec["minResources"] = resources
    if is_volcano(scheduler):
        # An existing group's queue wins: Volcano may have admitted it there already.
        existing = ((observed or {}).get("spec") or {}).get("queue")
        spec["queue"] = existing or policy.get("queue") or "default"
        if policy.get("priorityClass"):
            spec["priorityClassName"] = policy["priorityClass"]
        api_version = "scheduling.volcano.sh/v1beta1"
    else:
        if policy.get("scheduleTimeoutSeconds") is not None:
            spec["scheduleTimeoutSeconds"] = policy["scheduleTimeoutSeconds"]
        api_version = "scheduling.x-k8s.io/v1alpha1"
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": metadata, "spec": spec}


def _kubernetes_pod_group(ctx: JobContext) -> Json:
    """kube-scheduler's own PodGroup: binds none of the job's pods until `minCount` of them fit.

    Its spec is immutable (docs/gang-scheduling.md), so it carries only what the job fixes at creation:
    no copy of the job's annotations, no resources (kube-scheduler checks each pod's own requests).
    """
    return {
        "apiVersion": KUBERNETES_API,
        "kind": "PodGroup",
        "metadata": {"name": ctx.name, "namespace": ctx.namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_member(ctx)}}},
    }


def holds_pods(ctx: JobContext, observed: Json | None) -> bool:
    """Volcano admits a gang by moving its PodGroup out of Pending; until then no pods are created."""
    if not is_volcano(ctx.settings.gang_scheduler):
        return False
    phase = ((observed or {}).get("status") or {}).get("phase")
    return phase in (None, "", "Pending")


def decorate_pod(ctx: JobContext, rtype: str, pod: Json) -> Json:
    """The desired pod as the gang scheduler in use expects it."""
    scheduler = ctx.settings.gang_scheduler
    spec = dict(pod["spec"])
    if family(scheduler) == KUBERNETES:
        # The pod's own scheduler (default-scheduler unless the template names another) does the gang.
        spec["schedulingGroup"] = {"podGroupName": ctx.name}
        return {**pod, "spec": spec}
    if not spec.get("schedulerName"):
        spec["schedulerName"] = VOLCANO if is_volcano(scheduler) else scheduler
    meta = dict(pod["metadata"])
    if is_volcano(scheduler):
        group = {VOLCANO_GROUP_ANNOTATION: ctx.name, VOLCANO_TASK_ANNOTATION: rtype.lower()}
        meta["annotations"] = {**meta.get("annotations", {}), **group}
    else:
        meta["labels"] = {**meta["labels"], PLUGINS_GROUP_LABEL: ctx.name}
    return {**pod, "metadata": meta, "spec": spec}
