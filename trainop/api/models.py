"""Pydantic models of the kubeflow.org/v1 job API, with Kubernetes' JSON names.

Pod templates stay plain dicts: they are core/v1's type, validated by the apiserver against the
PodTemplateSpec schema embedded in our CRDs. Unknown fields are ignored rather than rejected so that a
newer CRD version can add fields without breaking older hooks.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainop.api.kinds import KINDS, KindInfo


class Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", strict=True)


def _f(description: str, alias: str | None = None) -> Any:
    return Field(default=None, description=description, alias=alias)


class RDZVConf(Model):
    key: str | None = _f("Rendezvous configuration key.")
    value: str | None = _f("Rendezvous configuration value.")


class ElasticPolicy(Model):
    min_replicas: int | None = _f("Lower bound of Worker replicas (torchrun --nnodes min).", "minReplicas")
    max_replicas: int | None = _f("Upper bound of Worker replicas (torchrun --nnodes max).", "maxReplicas")
    rdzv_backend: str | None = _f("Rendezvous backend: c10d, etcd or etcd-v2.", "rdzvBackend")
    rdzv_port: int | None = _f("Rendezvous port; defaults to the Worker's pytorchjob-port.", "rdzvPort")
    rdzv_host: str | None = _f("Rendezvous host; defaults to <job>-worker-0.", "rdzvHost")
    rdzv_id: str | None = _f("Rendezvous id (PET_RDZV_ID).", "rdzvId")
    rdzv_conf: list[RDZVConf] | None = _f("Extra rendezvous configuration (PET_RDZV_CONF).", "rdzvConf")
    standalone: bool | None = _f("Start a local standalone rendezvous backend (PET_STANDALONE).")
    n_proc_per_node: int | None = _f("Deprecated: use spec.nprocPerNode.", "nProcPerNode")
    max_restarts: int | None = _f("torchrun --max-restarts (PET_MAX_RESTARTS).", "maxRestarts")
    metrics: list[dict[str, Any]] | None = _f(
        "autoscaling/v2 MetricSpecs; when set an HorizontalPodAutoscaler scales the Worker replicas."
    )


class PaddleElasticPolicy(Model):
    min_replicas: int | None = _f("Lower bound of Worker replicas.", "minReplicas")
    max_replicas: int | None = _f("Upper bound of Worker replicas.", "maxReplicas")
    max_restarts: int | None = _f("Maximum restarts.", "maxRestarts")
    metrics: list[dict[str, Any]] | None = _f("autoscaling/v2 MetricSpecs.")


class SchedulingPolicy(Model):
    min_available: int | None = _f("PodGroup minMember; defaults to the total replicas.", "minAvailable")
    queue: str | None = _f("Volcano queue; immutable.")
    min_resources: dict[str, int | str] | None = _f("PodGroup minResources.", "minResources")
    priority_class: str | None = _f("PodGroup priorityClassName.", "priorityClass")
    schedule_timeout_seconds: int | None = _f(
        "scheduler-plugins PodGroup scheduleTimeoutSeconds.", "scheduleTimeoutSeconds"
    )


class RunPolicy(Model):
    clean_pod_policy: str | None = _f(
        "Which pods to delete when the job finishes: All, Running or None (default).", "cleanPodPolicy"
    )
    ttl_seconds_after_finished: int | None = _f(
        "Delete the finished job this many seconds after its completion.", "ttlSecondsAfterFinished"
    )
    active_deadline_seconds: int | None = _f(
        "Fail the job once it has been active this long.", "activeDeadlineSeconds"
    )
    backoff_limit: int | None = _f("Number of restarts before the job is marked Failed.", "backoffLimit")
    scheduling_policy: SchedulingPolicy | None = _f("Gang-scheduling parameters.", "schedulingPolicy")
    suspend: bool | None = _f("Delete all pods and stop the job until set back to false.")
    managed_by: str | None = _f(
        "Controller that reconciles the job: kubeflow.org/training-operator (default) or "
        "kueue.x-k8s.io/multikueue. Immutable.",
        "managedBy",
    )


class ReplicaSpec(Model):
    replicas: int | None = _f("Number of pods of this replica type.")
    template: dict[str, Any] | None = _f("Pod template of this replica type.")
    restart_policy: str | None = _f("Always, OnFailure, Never or ExitCode.", "restartPolicy")


class JobCondition(Model):
    type: str = Field(description="Created, Running, Restarting, Succeeded, Suspended or Failed.")
    status: str = Field(description="True, False or Unknown.")
    reason: str | None = _f("Machine-readable reason, <Kind><Reason>.")
    message: str | None = _f("Human-readable message.")
    last_update_time: str | None = _f("Last time the condition was updated.", "lastUpdateTime")
    last_transition_time: str | None = _f("Last time the condition changed status.", "lastTransitionTime")


class ReplicaStatus(Model):
    active: int | None = _f("Running pods.")
    succeeded: int | None = _f("Succeeded pods.")
    failed: int | None = _f("Failed pods.")
    selector: str | None = _f("Label selector of the pods, for the scale subresource.")
    label_selector: dict[str, Any] | None = _f("Deprecated label selector object.", "labelSelector")


class JobStatus(Model):
    conditions: list[JobCondition] | None = _f("Observed conditions, newest last.")
    replica_statuses: dict[str, ReplicaStatus] | None = _f("Pod counts per replica type.", "replicaStatuses")
    start_time: str | None = _f("When the job started (reset on resume).", "startTime")
    completion_time: str | None = _f("When the job finished.", "completionTime")
    last_reconcile_time: str | None = _f(
        "Last reconcile that was delayed by gang scheduling.", "lastReconcileTime"
    )


ReplicaSpecs = dict[str, ReplicaSpec]


class TFJobSpec(Model):
    run_policy: RunPolicy | None = _f("Run policy of the job.", "runPolicy")
    success_policy: str | None = _f('"" (chief or worker 0 decides) or AllWorkers.', "successPolicy")
    tf_replica_specs: ReplicaSpecs = Field(
        description="Chief, Master, PS, Worker and Evaluator.", alias="tfReplicaSpecs"
    )
    enable_dynamic_worker: bool | None = _f(
        "Sparse TF_CONFIG; tolerate Worker failures.", "enableDynamicWorker"
    )


class PyTorchJobSpec(Model):
    run_policy: RunPolicy | None = _f("Run policy of the job.", "runPolicy")
    elastic_policy: ElasticPolicy | None = _f("torchrun elastic training.", "elasticPolicy")
    pytorch_replica_specs: ReplicaSpecs = Field(description="Master and Worker.", alias="pytorchReplicaSpecs")
    nproc_per_node: str | None = _f("Processes per pod: auto, cpu, gpu or an integer.", "nprocPerNode")


class XGBoostJobSpec(Model):
    run_policy: RunPolicy | None = _f("Run policy of the job.", "runPolicy")
    xgb_replica_specs: ReplicaSpecs = Field(description="Master and Worker.", alias="xgbReplicaSpecs")


class MPIJobSpec(Model):
    slots_per_worker: int | None = _f("Slots per worker in the hostfile (default 1).", "slotsPerWorker")
    clean_pod_policy: str | None = _f("Legacy copy of runPolicy.cleanPodPolicy.", "cleanPodPolicy")
    mpi_replica_specs: ReplicaSpecs = Field(description="Launcher and Worker.", alias="mpiReplicaSpecs")
    main_container: str | None = _f("Container kubexec.sh execs into.", "mainContainer")
    run_policy: RunPolicy | None = _f("Run policy of the job.", "runPolicy")


class PaddleJobSpec(Model):
    run_policy: RunPolicy | None = _f("Run policy of the job.", "runPolicy")
    elastic_policy: PaddleElasticPolicy | None = _f(
        "Elastic policy (defaulted, not acted on).", "elasticPolicy"
    )
    paddle_replica_specs: ReplicaSpecs = Field(description="Master and Worker.", alias="paddleReplicaSpecs")


class JAXJobSpec(Model):
    run_policy: RunPolicy | None = _f("Run policy of the job.", "runPolicy")
    jax_replica_specs: ReplicaSpecs = Field(description="Worker.", alias="jaxReplicaSpecs")


class MXJobSpec(Model):
    run_policy: RunPolicy | None = _f("Run policy of the job.", "runPolicy")
    job_mode: str | None = _f("MXTrain or MXTune.", "jobMode")
    mx_replica_specs: ReplicaSpecs = Field(
        description="Scheduler, Server, Worker, TunerTracker, TunerServer and Tuner.", alias="mxReplicaSpecs"
    )


SPEC_MODELS: dict[str, type[Model]] = {
    "TFJob": TFJobSpec,
    "PyTorchJob": PyTorchJobSpec,
    "XGBoostJob": XGBoostJobSpec,
    "MPIJob": MPIJobSpec,
    "PaddleJob": PaddleJobSpec,
    "JAXJob": JAXJobSpec,
    "MXJob": MXJobSpec,
}
assert set(SPEC_MODELS) == set(KINDS)


def spec_model(info: KindInfo) -> type[Model]:
    return SPEC_MODELS[info.kind]
