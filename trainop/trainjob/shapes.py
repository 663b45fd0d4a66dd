"""The shapes the JobSet builder walks, checked before it walks them.

The apiserver checks a TrainJob, a runtime and a JobSet against their CRDs, so only a forged hook request
or another writer can hand the engine a container that is a number or an env list of strings. These
models read nothing (the builder works on the JSON itself); they only make such input a ValueError that
names the field, instead of a TypeError deep inside the build.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from trainop.api.models import Model, optional
from trainop.jsontypes import Json


class Named(Model):
    name: str


class Port(Model):
    container_port: int | None = optional("Port number.", "containerPort")
    name: str | None = optional("Port name.")


class Resources(Model):
    limits: dict[str, str | int | float] | None = optional("Limits.")
    requests: dict[str, str | int | float] | None = optional("Requests.")


class Container(Model):
    name: str
    env: list[Named] | None = optional("Env vars.")
    ports: list[Port] | None = optional("Ports.")
    resources: Resources | None = optional("Resources.")
    env_from: list[dict[str, Any]] | None = optional("Env sources.", "envFrom")


class PodSpec(Model):
    containers: list[Container] | None = optional("Containers.")
    init_containers: list[Container] | None = optional("Init containers.", "initContainers")


class Metadata(Model):
    labels: dict[str, str] | None = optional("Labels.")
    annotations: dict[str, str] | None = optional("Annotations.")


class PodTemplate(Model):
    metadata: Metadata | None = optional("Pod metadata.")
    spec: PodSpec | None = optional("Pod spec.")


class JobSpec(Model):
    parallelism: int | None = optional("Pods at once.")
    template: PodTemplate | None = optional("Pod template.")


class JobTemplate(Model):
    metadata: Metadata | None = optional("Job metadata.")
    spec: JobSpec | None = optional("Job spec.")


class ReplicatedJob(Model):
    name: str
    template: JobTemplate | None = optional("Job template.")


class JobSetSpec(Model):
    replicated_jobs: list[ReplicatedJob] | None = optional("Replicated jobs.", "replicatedJobs")
    suspend: bool | None = optional("Suspended.")


def check(model: type[Model], value: Any, where: str) -> None:
    """Raise ValueError naming the first field of ``value`` (at ``where``) that ``model`` refuses."""
    try:
        model.model_validate(value)
    except ValidationError as e:
        first = e.errors()[0]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise ValueError(f"{where}{path}: {first['msg']}") from None


def mapping(value: Any) -> Json:
    """``value`` if it is a JSON object, else an empty one (for optional parts that may be absent)."""
    return value if isinstance(value, dict) else {}
