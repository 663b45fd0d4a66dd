"""PaddleJob: PADDLE_* for collective (workers only) and parameter-server (with a Master) modes."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainop.api.checks import Result
from trainop.api.kinds import KindInfo
from trainop.api.models import Model, ReplicaSpecs, RunPolicy, optional
from trainop.frameworks.base import (
    Framework,
    check_elastic_bounds,
    default_elastic_bounds,
    env,
    replicas_of,
)
from trainop.job.context import JobContext
from trainop.jsontypes import Json

PADDLEJOB = KindInfo(
    kind="PaddleJob",
    plural="paddlejobs",
    singular="paddlejob",
    replica_field="paddleReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="paddle",
    port_name="master",
    port=36543,
    add_default_port=True,
    default_restart_policy="OnFailure",
    controller_name="paddlejob-controller",
    framework="paddle",
    master_types=("Master",),
    worker0_is_master_fallback=False,
    worker_type="Worker",
    scalable=True,
)


class PaddleElasticPolicy(Model):
    min_replicas: int | None = optional("Lower bound of Worker replicas.", "minReplicas")
    max_replicas: int | None = optional("Upper bound of Worker replicas.", "maxReplicas")
    max_restarts: int | None = optional("Maximum restarts.", "maxRestarts")
    metrics: list[dict[str, Any]] | None = optional("autoscaling/v2 MetricSpecs.")


class PaddleJobSpec(Model):
    run_policy: RunPolicy | None = optional("Run policy of the job.", "runPolicy")
    elastic_policy: PaddleElasticPolicy | None = optional(
        "Elastic policy (defaulted, not acted on).", "elasticPolicy"
    )
    paddle_replica_specs: ReplicaSpecs = Field(description="Master and Worker.", alias="paddleReplicaSpecs")


class Paddle(Framework):
    info = PADDLEJOB
    spec_model = PaddleJobSpec
    deleted_job_reason = "SuccessfulDeletePod"
    warns_restarting_only_when_short = True

    def default_spec(self, spec: Json) -> Json:
        return default_elastic_bounds(spec, replicas_of(spec, self.info.replica_field, "Worker"))

    def check_spec(self, spec: Json, result: Result) -> None:
        elastic = spec.get("elasticPolicy")
        if isinstance(elastic, dict):
            check_elastic_bounds(result, elastic)

    def qualified(self, ctx: JobContext) -> bool:
        # Kubeflow switches on whether a Master spec exists: worker-only jobs get `<ns>/<name>`.
        return not ctx.has("Master")

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        out = [
            env("PYTHONUNBUFFERED", "1"),
            env("PADDLE_JOB_ID", ctx.name),
            env("PADDLE_NNODES", ctx.total_replicas()),
        ]
        leader = "Master" if ctx.has("Master") else "Worker"
        port = ctx.port(leader, 0)
        if rtype == leader and index == 0:
            # The rendezvous leader advertises its own pod IP: its Service is not resolvable until Ready.
            out += [
                {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                env("PADDLE_MASTER", f"$(POD_IP_DUMMY):{port}"),
            ]
        else:
            out.append(env("PADDLE_MASTER", f"{ctx.host(leader, 0)}:{port}"))
        if ctx.has("Master"):
            out.append(env("PADDLE_SERVER_NUM" if rtype == "Master" else "PADDLE_TRAINER_NUM", "1"))
        return out
