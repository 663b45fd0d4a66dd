"""Everything a framework may add to or change about the common path, which the base class implements.

A framework module subclasses `Framework` and overrides only what differs for its kind: its facts
(`info`), its spec model, extra defaulting and validation, the environment and children of its pods, its
success rule, and the places where Kubeflow's controller for that kind records other Events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainop.api import constants as c
from trainop.api.checks import Result
from trainop.api.kinds import KindInfo
from trainop.api.models import Model
from trainop.job.context import JobContext
from trainop.job.event import NORMAL, Event
from trainop.job.mounts import Mounted
from trainop.job.observed import Children, ObservedPod
from trainop.jsontypes import Json


def env(name: str, value: str | int) -> Json:
    return {"name": name, "value": str(value)}


# A TrainJob's pods (Trainer v2) find each other through JobSet's DNS: the trainer step is the
# replicatedJob `node`, its first pod `<job>-node-0-0` in the subdomain named after the job.
TRAINJOB_PORT = 29500
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def completion_index_env(name: str) -> Json:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}}


@dataclass(frozen=True)
class TrainerNodes:
    """A TrainJob's trainer step as a framework sees it: how many nodes, of what size."""

    job_name: str
    num_nodes: int
    gpus_per_node: int
    cpus_per_node: int
    num_proc_per_node: int | None = None

    @property
    def first_node(self) -> str:
        return f"{self.job_name}-node-0-0.{self.job_name}"


@dataclass(frozen=True)
class Counts:
    """Pods of one replica type by outcome, as Kubeflow counts them from phases."""

    active: int = 0
    succeeded: int = 0
    failed: int = 0


class Framework:
    """The common behaviour; each framework module subclasses it and overrides what differs."""

    info: KindInfo
    spec_model: type[Model]
    # Validation requires a container named `info.default_container` in every replica's template: the
    # operator injects its environment and port into it (not MPI, whose controller uses the first one).
    requires_default_container = True
    has_services = True
    # Replica restartPolicies under which a failed pod is recreated instead of failing the job
    # (ExitCode only for retryable exit codes).
    recreate_policies: tuple[str, ...] = ("Always", "OnFailure", "ExitCode")
    # "Kind ns/name is running." (TF, JAX) versus "Kind name is running."
    qualified_messages = False
    # Suffix after the kind in the Failed reason when replicas fail (not for limits or ExitCode).
    failed_reason = "Failed"

    # ---- admission --------------------------------------------------------------------------------
    def default_spec(self, spec: Json) -> Json:
        """The spec (whose runPolicy is an object) with the defaults beyond the common ones; `spec` itself
        when there are none. Copy-on-write; malformed input is left as it is, for validation to report."""
        return spec

    def check_spec(self, spec: Json, result: Result) -> None:
        """Validation beyond the common rules and the spec model's types."""
        return None

    # ---- children ---------------------------------------------------------------------------------
    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        return []

    # Whether the TrainJob's own trainer env goes in before this framework's (Trainer's plugin order).
    trainjob_user_env_first = True

    def trainjob_env(self, nodes: TrainerNodes) -> list[Json]:
        """The env of a TrainJob's trainer `node` container under this framework's mlPolicy (Trainer v2).

        Upserted in order after the TrainJob's own env, each replacing a same-named variable in place.
        """
        return []

    # Variables a TrainJob's training process sees without the operator giving them: those its launcher
    # sets from the injected ones (`trainop migrate` does not count them as lost).
    trainjob_launcher_env: frozenset[str] = frozenset()

    # The replica types whose pods become a TrainJob's nodes, in node order (`trainop migrate`); none:
    # the kind has no Trainer v2 ML policy.
    trainjob_node_types: tuple[str, ...] = ()

    def trainjob_command(self, command: list[str]) -> tuple[list[str], str | None]:
        """A v1 replica's command as a TrainJob's node runs it, and why it changed (None: unchanged)."""
        return command, None

    def trainjob_trainer(self, spec: Json, command_changed: bool) -> tuple[Json, list[str]]:
        """The TrainJob `trainer` fields (besides numNodes) a v1 spec's own fields become, and the spec
        fields a TrainJob cannot carry, each with why."""
        return {}, []

    def env_container_indexes(self, ctx: JobContext, rtype: str, containers: Sequence[Json]) -> list[int]:
        """Which containers get the framework environment: by default every one."""
        return list(range(len(containers)))

    def init_containers(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        return []

    def decorate_pod(self, ctx: JobContext, rtype: str, index: int, pod: Json) -> Json:
        """The desired pod with what this kind adds beyond environment and init containers; `pod` itself
        when nothing."""
        return pod

    def waits_for(self, ctx: JobContext, rtype: str, children: Children) -> bool:
        """A pod of this type must not be created yet: something it needs does not exist."""
        return False

    def extra_children(self, ctx: JobContext, pods: Sequence[ObservedPod], active: bool) -> list[Json]:
        """Children besides pods and services; `active` is False once the job is finished or suspended."""
        return []

    def mounts(self, ctx: JobContext) -> tuple[Mounted, ...]:
        """The ConfigMap children among `extra_children` whose content the pods run: a pod mounting one
        waits until it is the job's own with that content (trainop.job.mounts)."""
        return ()

    def mounted_names(self, job_name: str) -> tuple[str, ...]:
        """The names of every ConfigMap `mounts` may return for a job called `job_name`, whatever its
        spec (the customize hook asks Metacontroller for same-named objects by these names)."""
        return ()

    # ---- roles and status -------------------------------------------------------------------------
    def is_master_role(self, ctx: JobContext, rtype: str, index: int) -> bool:
        present = [t for t in self.info.master_types if ctx.has(t)]
        if present:
            return rtype in present
        return self.info.worker0_is_master_fallback and rtype == self.info.worker_type and index == 0

    def leader_types(self, ctx: JobContext) -> list[str]:
        """Replica types whose state decides Running and Succeeded."""
        present = [t for t in self.info.master_types if ctx.has(t)]
        worker = self.info.worker_type
        return present or ([worker] if ctx.has(worker) else [])

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

    # ---- events: where Kubeflow's controller for this kind records other ones ---------------------
    # The reason its DeleteJob records once ttlSecondsAfterFinished has deleted the job.
    deleted_job_reason = "SuccessfulDeleteJob"
    # Whether its UpdateJobStatus warns Restarting per replica type with failed pods under a restarting
    # policy, and whether only while the type is short of replicas (failed > 0 and replicas > succeeded +
    # running) or whenever one failed.
    warns_restarting = True
    warns_restarting_only_when_short = False
    # Whether its ReconcilePods reports every terminated pod's exit code and its restart or failure.
    reports_pod_outcomes = True

    def active_events(self, ctx: JobContext, children: Children, pods: Sequence[ObservedPod]) -> list[Event]:
        """Events of a sync of an active job besides those about abnormal pods and pod outcomes."""
        return []

    def created_pod_event(self, ctx: JobContext, rtype: str | None, name: str, occurrence: str) -> Event:
        return Event(NORMAL, "SuccessfulCreatePod", f"Created pod: {name}", occurrence)

    def succeeded_events(self, ctx: JobContext) -> list[Event]:
        """Events recorded before the job's own Succeeded event."""
        return []

    def failed_events(self, ctx: JobContext, pods: Sequence[ObservedPod]) -> list[Event]:
        """Events recorded before the job's own Failed event (not for ExitCode failures)."""
        return []


def default_elastic_bounds(spec: Json, worker_replicas: Any) -> Json:
    """The spec with elasticPolicy's missing bound copied from the other one, or both taken from the
    worker count."""
    elastic = spec.get("elasticPolicy")
    if not isinstance(elastic, dict):
        return spec
    lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
    if lo is None and hi is not None:
        bounds = {"minReplicas": hi}
    elif hi is None and lo is not None:
        bounds = {"maxReplicas": lo}
    elif lo is None and hi is None and isinstance(worker_replicas, int):
        bounds = {"minReplicas": worker_replicas, "maxReplicas": worker_replicas}
    else:
        return spec
    return {**spec, "elasticPolicy": {**elastic, **bounds}}


def check_elastic_bounds(result: Result, elastic: Json) -> None:
    """spec.elasticPolicy's replica bounds, as the PyTorch and Paddle webhooks check them."""
    lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        result.error(
            "spec.elasticPolicy.minReplicas",
            f"Invalid value: {lo}: must be less than or equal to spec.elasticPolicy.maxReplicas ({hi})",
        )
    if isinstance(lo, int) and lo < 1:
        result.error("spec.elasticPolicy.minReplicas", f"Invalid value: {lo}: must be at least 1")


def replicas_of(spec: Json, replica_field: str, rtype: str) -> Any:
    """The raw `replicas` of one replica type, before defaulting has filled it in."""
    specs = spec.get(replica_field)
    rspec = specs.get(rtype) if isinstance(specs, dict) else None
    return rspec.get("replicas") if isinstance(rspec, dict) else None


def master_role_label(is_master: bool) -> dict[str, str]:
    return {c.LABEL_JOB_ROLE: c.JOB_ROLE_MASTER} if is_master else {}
