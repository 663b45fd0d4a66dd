"""JAXJob: jax.distributed's coordinator address and process ids."""

from __future__ import annotations

from pydantic import Field

from trainop.api.kinds import KindInfo
from trainop.api.models import Model, ReplicaSpecs, RunPolicy, optional
from trainop.frameworks.base import TRAINJOB_PORT, Framework, TrainerNodes, completion_index_env, env
from trainop.job.context import JobContext
from trainop.jsontypes import Json

JAXJOB = KindInfo(
    kind="JAXJob",
    plural="jaxjobs",
    singular="jaxjob",
    replica_field="jaxReplicaSpecs",
    replica_types=("Worker",),
    default_container="jax",
    port_name="jaxjob-port",
    port=6666,
    add_default_port=True,
    default_restart_policy="Never",
    controller_name="jaxjob-controller",
    framework="jax",
    master_types=(),
    worker0_is_master_fallback=True,
    worker_type="Worker",
    scalable=True,
)


class JAXJobSpec(Model):
    run_policy: RunPolicy | None = optional("Run policy of the job.", "runPolicy")
    jax_replica_specs: ReplicaSpecs = Field(description="Worker.", alias="jaxReplicaSpecs")


class Jax(Framework):
    info = JAXJOB
    trainjob_node_types = ("Worker",)
    spec_model = JAXJobSpec
    qualified_messages = True
    deleted_job_reason = "SuccessfulDeletePod"
    warns_restarting_only_when_short = True

    # Trainer's JAX plugin leaves the TrainJob's env to the JobSet builder, which runs after it.
    trainjob_user_env_first = False

    def trainjob_env(self, nodes: TrainerNodes) -> list[Json]:
        return [
            env("JAX_NUM_PROCESSES", nodes.num_nodes),
            completion_index_env("JAX_PROCESS_ID"),
            env("JAX_COORDINATOR_ADDRESS", f"{nodes.first_node}:{TRAINJOB_PORT}"),
        ]

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        return [
            env("PYTHONUNBUFFERED", "1"),
            env("COORDINATOR_PORT", ctx.port("Worker", 0)),
            env("COORDINATOR_ADDRESS", ctx.host("Worker", 0)),
            env("NUM_PROCESSES", ctx.total_replicas()),
            env("PROCESS_ID", index),
        ]
