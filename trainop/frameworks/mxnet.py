"""MXJob (Kubeflow v1.8 semantics): MX_CONFIG and the DMLC_* parameter-server variables."""

from __future__ import annotations

import json

from pydantic import Field

from trainop.api.checks import Result, check_enum
from trainop.api.kinds import KindInfo
from trainop.api.models import Model, ReplicaSpecs, RunPolicy, optional
from trainop.frameworks.base import Framework, env
from trainop.job.context import JobContext
from trainop.jsontypes import Json

MXJOB = KindInfo(
    kind="MXJob",
    plural="mxjobs",
    singular="mxjob",
    replica_field="mxReplicaSpecs",
    replica_types=("Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"),
    default_container="mxnet",
    port_name="mxjob-port",
    port=9091,
    add_default_port=True,
    default_restart_policy="Never",
    controller_name="mxjob-controller",
    framework="mxnet",
    master_types=("Scheduler",),
    worker0_is_master_fallback=False,
    worker_type="Worker",
    single_replica_types=("Scheduler",),
    deprecated="MXJob was removed from Kubeflow Training Operator v1.9; served here with v1.8 semantics",
)
JOB_MODES = ("MXTrain", "MXTune")


class MXJobSpec(Model):
    run_policy: RunPolicy | None = optional("Run policy of the job.", "runPolicy")
    job_mode: str | None = optional("MXTrain or MXTune.", "jobMode")
    mx_replica_specs: ReplicaSpecs = Field(
        description="Scheduler, Server, Worker, TunerTracker, TunerServer and Tuner.", alias="mxReplicaSpecs"
    )


TUNER_KEY_ANNOTATION = "mxnet.kubeflow.org/tuner-server-key"


class MXNet(Framework):
    info = MXJOB
    spec_model = MXJobSpec

    def check_spec(self, spec: Json, result: Result) -> None:
        check_enum(result, "spec.jobMode", spec.get("jobMode"), JOB_MODES)

    recreate_policies = ("ExitCode",)

    def leader_types(self, ctx: JobContext) -> list[str]:
        if ctx.has("Scheduler"):
            return ["Scheduler"]
        # A single worker without scheduler or servers is a plain local training.
        return ["Worker"] if ctx.has("Worker") else []

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        cluster = {
            t.lower(): [{"url": ctx.host(t, i), "port": ctx.port(t, i)} for i in range(ctx.replicas(t))]
            for t in sorted(ctx.replica_specs, key=str.lower)
        }
        labels = {
            t.lower(): str(
                (spec["template"].get("metadata") or {}).get("annotations", {}).get(TUNER_KEY_ANNOTATION, "")
            )
            for t, spec in sorted(ctx.replica_specs.items(), key=lambda kv: kv[0].lower())
        }
        config = {"cluster": cluster, "labels": labels, "task": {"type": rtype.lower(), "index": index}}
        out = [env("MX_CONFIG", json.dumps(config, separators=(",", ":")))]
        if ctx.has("Scheduler"):
            out += [
                env("DMLC_PS_ROOT_PORT", ctx.port("Scheduler", 0)),
                env("DMLC_PS_ROOT_URI", ctx.host("Scheduler", 0)),
            ]
        out += [
            env("DMLC_NUM_SERVER", ctx.replicas("Server")),
            env("DMLC_NUM_WORKER", ctx.replicas("Worker")),
            env("DMLC_ROLE", rtype.lower()),
            env("DMLC_USE_KUBERNETES", "1"),
        ]
        if rtype == "Worker":
            out.append(env("DMLC_WORKER_ID", index))
        return out
