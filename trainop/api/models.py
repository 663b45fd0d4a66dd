"""Pydantic models of the kubeflow.org/v1 job API, with Kubernetes' JSON names.

Each kind's spec model lives with its framework (trainop.frameworks); these are the types they share.
Pod templates stay plain dicts: they are core/v1's type, validated by the apiserver against the
PodTemplateSpec schema embedded in our CRDs. Unknown fields are ignored rather than rejected so that a
newer CRD version can add fields without breaking older hooks.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", strict=True)


def optional(description: str, alias: str | None = None) -> Any:
    return Field(default=None, description=description, alias=alias)


class SchedulingPolicy(Model):
    min_available: int | None = optional(
        "PodGroup minMember; defaults to the total replicas.", "minAvailable"
    )
    queue: str | None = optional("Volcano queue; immutable.")
    min_resources: dict[str, int | str] | None = optional("PodGroup minResources.", "minResources")
    priority_class: str | None = optional("PodGroup priorityClassName.", "priorityClass")
    schedule_timeout_seconds: int | None = optional(
        "scheduler-plugins PodGroup scheduleTimeoutSeconds.", "scheduleTimeoutSeconds"
    )


class RunPolicy(Model):
    clean_pod_policy: str | None = optional(
        "Which pods to delete when the job finishes: All, Running or None (default).", "cleanPodPolicy"
    )
    ttl_seconds_after_finished: int | None = optional(
        "Delete the finished job this many seconds after its completion.", "ttlSecondsAfterFinished"
    )
    active_deadline_seconds: int | None = optional(
        "Fail the job once it has been active this long.", "activeDeadlineSeconds"
    )
    backoff_limit: int | None = optional(
        "Number of restarts before the job is marked Failed.", "backoffLimit"
    )
    scheduling_policy: SchedulingPolicy | None = optional("Gang-scheduling parameters.", "schedulingPolicy")
    suspend: bool | None = optional("Delete all pods and stop the job until set back to false.")
    managed_by: str | None = optional(
        "Controller that reconciles the job: kubeflow.org/training-operator (default) or "
        "kueue.x-k8s.io/multikueue. Immutable.",
        "managedBy",
    )


class ReplicaSpec(Model):
    replicas: int | None = optional("Number of pods of this replica type.")
    template: dict[str, Any] | None = optional("Pod template of this replica type.")
    restart_policy: str | None = optional("Always, OnFailure, Never or ExitCode.", "restartPolicy")


class JobCondition(Model):
    type: str = Field(description="Created, Running, Restarting, Succeeded, Suspended or Failed.")
    status: str = Field(description="True, False or Unknown.")
    reason: str | None = optional("Machine-readable reason, <Kind><Reason>.")
    message: str | None = optional("Human-readable message.")
    last_update_time: str | None = optional("Last time the condition was updated.", "lastUpdateTime")
    last_transition_time: str | None = optional(
        "Last time the condition changed status.", "lastTransitionTime"
    )


class ReplicaStatus(Model):
    active: int | None = optional("Running pods.")
    succeeded: int | None = optional("Succeeded pods.")
    failed: int | None = optional("Failed pods.")
    selector: str | None = optional("Label selector of the pods, for the scale subresource.")
    label_selector: dict[str, Any] | None = optional("Deprecated label selector object.", "labelSelector")


class JobStatus(Model):
    conditions: list[JobCondition] | None = optional("Observed conditions, newest last.")
    replica_statuses: dict[str, ReplicaStatus] | None = optional(
        "Pod counts per replica type.", "replicaStatuses"
    )
    start_time: str | None = optional("When the job started (reset on resume).", "startTime")
    completion_time: str | None = optional("When the job finished.", "completionTime")
    last_reconcile_time: str | None = optional(
        "Last reconcile that was delayed by gang scheduling.", "lastReconcileTime"
    )


ReplicaSpecs = dict[str, ReplicaSpec]
