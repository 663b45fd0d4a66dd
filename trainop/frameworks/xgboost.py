"""XGBoostJob: rabit-style MASTER_*/RANK/WORLD_SIZE, WORKER_ADDRS for LightGBM; any failure fails the job."""

from __future__ import annotations

from pydantic import Field

from trainop.api.kinds import KindInfo
from trainop.api.models import Model, ReplicaSpecs, RunPolicy, optional
from trainop.frameworks.base import TRAINJOB_PORT, Framework, TrainerNodes, completion_index_env, env
from trainop.job.context import JobContext
from trainop.jsontypes import Json

XGBOOSTJOB = KindInfo(
    kind="XGBoostJob",
    plural="xgboostjobs",
    singular="xgboostjob",
    replica_field="xgbReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="xgboost",
    port_name="xgboostjob-port",
    port=9999,
    add_default_port=True,
    default_restart_policy="Never",
    controller_name="xgboostjob-controller",
    framework="xgboost",
    master_types=("Master",),
    worker0_is_master_fallback=False,
    worker_type="Worker",
    required_types=("Master",),
    single_replica_types=("Master",),
)


class XGBoostJobSpec(Model):
    run_policy: RunPolicy | None = optional("Run policy of the job.", "runPolicy")
    xgb_replica_specs: ReplicaSpecs = Field(description="Master and Worker.", alias="xgbReplicaSpecs")


class XGBoost(Framework):
    info = XGBOOSTJOB
    trainjob_node_types = ("Master", "Worker")
    spec_model = XGBoostJobSpec
    # Kubeflow fails an XGBoostJob on any failed pod unless restartPolicy is ExitCode.
    recreate_policies = ("ExitCode",)

    def trainjob_env(self, nodes: TrainerNodes) -> list[Json]:
        # One worker per GPU, or one per node on CPUs; the tracker runs beside rank 0.
        workers = nodes.num_nodes * (nodes.gpus_per_node or 1)
        return [
            env("DMLC_TRACKER_URI", nodes.first_node),
            env("DMLC_TRACKER_PORT", TRAINJOB_PORT),
            completion_index_env("DMLC_TASK_ID"),
            env("DMLC_NUM_WORKER", workers),
        ]

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        total = ctx.total_replicas()
        rank = index if rtype == "Master" else index + ctx.replicas("Master")
        out = [
            env("MASTER_PORT", ctx.port("Master", 0)),
            env("MASTER_ADDR", ctx.host("Master", 0)),
            env("WORLD_SIZE", total),
            env("RANK", rank),
            env("PYTHONUNBUFFERED", "1"),
        ]
        if total > 1 and ctx.has("Worker"):
            workers = ",".join(ctx.host("Worker", i) for i in range(total - 1))
            out += [env("WORKER_PORT", ctx.port("Worker", 0)), env("WORKER_ADDRS", workers)]
        return out
