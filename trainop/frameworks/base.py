"""What a framework may change about a job's children and its status; defaults are Kubeflow's common path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainop.api import constants as c
from trainop.api.kinds import KindInfo
from trainop.job.context import JobContext
from trainop.job.observed import ObservedPod

Json = dict[str, Any]


def env(name: str, value: str | int) -> Json:
    return {"name": name, "value": str(value)}


@dataclass(frozen=True)
class Counts:
    """Pods of one replica type by outcome, as Kubeflow counts them from phases."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0


class Framework:
    """The common behaviour; each framework module subclasses it and overrides what differs."""

    info: KindInfo
    has_services = True
    # Replica restartPolicies under which a failed pod is recreated instead of failing the job
    # (ExitCode only for retryable exit codes).
    recreate_policies: tuple[str, ...] = ("Always", "OnFailure", "ExitCode")
    # "Kind ns/name is running." (TF, JAX) versus "Kind name is running."
    qualified_messages = False
    # Suffix after the kind in the Failed reason when replicas fail (not for limits or ExitCode).
    failed_reason = "Failed"

    # ---- children ---------------------------------------------------------------------------------
    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        return []

    def env_container_indexes(self, ctx: JobContext, rtype: str, containers: Sequence[Json]) -> list[int]:
        """Which containers get the framework environment: by default every one."""
        return list(range(len(containers)))

    def init_containers(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        return []

    def decorate_pod(self, ctx: JobContext, rtype: str, index: int, pod: Json) -> None:
        return None

    def waits_for(self, ctx: JobContext, rtype: str, children: Mapping[str, Mapping[str, Json]]) -> bool:
        """A pod of this type must not be created yet: something it needs does not exist."""
        return False

    def extra_children(self, ctx: JobContext, pods: Sequence[ObservedPod], active: bool) -> list[Json]:
        """Children besides pods and services; `active` is False once the job is finished or suspended."""
        return []

    # ---- roles and status -------------------------------------------------------------------------
    def is_master_role(self, ctx: JobContext, rtype: str, index: int) -> bool:
        present = [t for t in self.info.master_types if ctx.has(t)]
        if present:
            return rtype in present
        return self.info.worker0_is_master_fallback and rtype == "Worker" and index == 0

    def leader_types(self, ctx: JobContext) -> list[str]:
        """Replica types whose state decides Running and Succeeded."""
        present = [t for t in self.info.master_types if ctx.has(t)]
        return present or (["Worker"] if ctx.has("Worker") else [])

    def succeeded(self, ctx: JobContext, counts: dict[str, Counts], pods: Sequence[ObservedPod]) -> bool:
        leaders = [t for t in self.leader_types(ctx) if ctx.replicas(t) > 0]
        return bool(leaders) and all(counts[t].succeeded >= ctx.replicas(t) for t in leaders)

    def settled_statuses(self, ctx: JobContext, statuses: Json, pods: Sequence[ObservedPod]) -> Json:
        """Replica statuses as the job finishes (MPI forgets its workers)."""
        return statuses

    def tolerates_failure(self, ctx: JobContext, rtype: str) -> bool:
        """A permanently failed pod of this type does not fail the job (TF dynamic workers)."""
        return False

    def qualified(self, ctx: JobContext) -> bool:
        """Whether Running/Succeeded messages name the job as `<ns>/<name>` (Kubeflow varies per kind)."""
        return self.qualified_messages

    def exit_code_container(self, ctx: JobContext, rtype: str) -> str:
        """The container whose exit code decides ExitCode restarts and ExitedWithCode events."""
        return self.info.default_container

    def running_message(self, ctx: JobContext) -> str:
        label = f"{ctx.namespace}/{ctx.name}" if self.qualified(ctx) else ctx.name
        return f"{self.info.kind} {label} is running."

    def succeeded_message(self, ctx: JobContext) -> str:
        if self.qualified(ctx):
            return f"{self.info.kind} {ctx.namespace}/{ctx.name} successfully completed."
        return f"{self.info.kind} {ctx.name} is successfully completed."

    def failed_message(self, ctx: JobContext, rtype: str, n: int) -> str:
        return f"{self.info.kind} {ctx.name} is failed because {n} {rtype} replica(s) failed."


def master_role_label(is_master: bool) -> dict[str, str]:
    return {c.LABEL_JOB_ROLE: c.JOB_ROLE_MASTER} if is_master else {}
