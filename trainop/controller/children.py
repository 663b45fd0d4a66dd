"""Building the desired pods and headless Services of a job, exactly as Kubeflow names and labels them."""

from __future__ import annotations

import orjson

from trainop.api import constants as c
from trainop.api.jsonvalues import copy_json
from trainop.extensions import Resolved
from trainop.frameworks.base import Framework, master_role_label
from trainop.job.context import JobContext
from trainop.jsontypes import Json


def base_labels(ctx: JobContext) -> dict[str, str]:
    return {
        c.LABEL_OPERATOR_NAME: ctx.info.controller_name,
        c.LABEL_JOB_NAME: ctx.name.replace("/", "-"),
    }


def replica_labels(ctx: JobContext, rtype: str, index: int) -> dict[str, str]:
    labels = {**base_labels(ctx), c.LABEL_REPLICA_TYPE: rtype.lower()}
    if rtype not in ctx.info.unindexed_types:
        labels[c.LABEL_REPLICA_INDEX] = str(index)
    return labels


def selector(ctx: JobContext, rtype: str) -> str:
    """The label selector string of one replica type, as the scale subresource reads it."""
    labels = {**base_labels(ctx), c.LABEL_REPLICA_TYPE: rtype.lower()}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def pod(ctx: JobContext, fw: Framework, extensions: Resolved, rtype: str, index: int) -> Json:
    template = orjson.loads(ctx.template_bytes[rtype])
    meta = template.get("metadata") or {}
    spec = template["spec"]
    labels = {
        **(meta.get("labels") or {}),
        **replica_labels(ctx, rtype, index),
        **master_role_label(fw.is_master_role(ctx, rtype, index)),
    }
    metadata: Json = {
        "name": ctx.info.pod_name(ctx.name, rtype, index),
        "namespace": ctx.namespace,
        "labels": labels,
    }
    if meta.get("annotations"):
        metadata["annotations"] = dict(meta["annotations"])
    containers = spec["containers"]
    extra_env = fw.env(ctx, rtype, index)
    if extra_env:
        for i in fw.env_container_indexes(ctx, rtype, containers):
            containers[i]["env"] = [*(containers[i].get("env") or []), *copy_json(extra_env)]
    init = fw.init_containers(ctx, rtype, index)
    if init:
        spec["initContainers"] = [*(spec.get("initContainers") or []), *init]
    policy = ctx.restart_policy(rtype)
    # ExitCode is the operator's policy; kubelet must not restart the container itself.
    spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
    out = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    return extensions.decorate_pod(ctx, fw.decorate_pod(ctx, rtype, index, out))


def service(ctx: JobContext, rtype: str, index: int) -> Json:
    labels = replica_labels(ctx, rtype, index)
    container = ctx.default_container(rtype) or {}
    ports = [
        {"name": p["name"], "port": p["containerPort"]}
        for p in container.get("ports") or []
        if p.get("name") and isinstance(p.get("containerPort"), int)
    ]
    spec: Json = {"clusterIP": "None", "selector": dict(labels)}
    if ports:
        spec["ports"] = ports
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": ctx.info.pod_name(ctx.name, rtype, index),
            "namespace": ctx.namespace,
            "labels": labels,
        },
        "spec": spec,
    }
