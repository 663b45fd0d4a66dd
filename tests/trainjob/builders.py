"""Builders of TrainJobs and runtimes as the apiserver stores them, for the v2 engine's tests."""

from __future__ import annotations

import copy
from typing import Any

from trainop.jsontypes import Json
from trainop.trainjob import constants as c


def container(name: str, image: str = "busybox", **fields: Any) -> Json:
    return {"name": name, "image": image, **fields}


def replicated_job(name: str, *containers: Json, ancestor: str | None = None, **job_spec: Any) -> Json:
    template: Json = {"spec": {**job_spec, "template": {"spec": {"containers": list(containers)}}}}
    if ancestor is not None:
        template["metadata"] = {"labels": {c.LABEL_ANCESTOR: ancestor}}
    return {"name": name, "template": template}


def trainer_step(*containers: Json) -> Json:
    return replicated_job(
        c.NODE, *(containers or (container(c.NODE, "pytorch/pytorch"),)), ancestor="trainer"
    )


def runtime(
    *rjobs: Json,
    policy: Json | None = None,
    kind: str = "ClusterTrainingRuntime",
    name: str = "torch-distributed",
    labels: Json | None = None,
) -> Json:
    spec: Json = {
        "template": {"spec": {"replicatedJobs": [copy.deepcopy(r) for r in rjobs or (trainer_step(),)]}}
    }
    if policy is not None:
        spec["mlPolicy"] = policy
    if labels is not None:
        spec["template"]["metadata"] = {"labels": labels}
    meta: Json = {"name": name}
    if kind == "TrainingRuntime":
        meta["namespace"] = "team-a"
    return {"apiVersion": c.API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def torch_runtime(*rjobs: Json, num_nodes: int = 1, **torch: Any) -> Json:
    return runtime(*rjobs, policy={"numNodes": num_nodes, "torch": dict(torch)})


def train_job(
    name: str = "mnist",
    runtime_name: str = "torch-distributed",
    trainer: Json | None = None,
    **spec: Any,
) -> Json:
    body: Json = {"runtimeRef": {"name": runtime_name}, **spec}
    if trainer is not None:
        body["trainer"] = trainer
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "team-a", "uid": "0b6f3c7e-1d2e-4f00-9a55-7f1f0c3c9e11"},
        "spec": body,
    }


def patch(manager: str, **template: Any) -> Json:
    return {"manager": manager, "trainingRuntimeSpec": {"template": template}}


def rjob_named(jobset: Json, name: str) -> Json:
    found: Json = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == name)
    return found


def node_container(jobset: Json, rjob: str = c.NODE, name: str = c.NODE) -> Json:
    containers = rjob_named(jobset, rjob)["template"]["spec"]["template"]["spec"]["containers"]
    found: Json = next(x for x in containers if x["name"] == name)
    return found


def env_of(container: Json) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}
