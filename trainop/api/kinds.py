"""The one table of per-kind facts. Every other module reads these instead of branching on the kind."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class KindInfo:
    kind: str
    plural: str
    singular: str
    replica_field: str
    # Canonical replica types, in the order status and children are emitted.
    replica_types: tuple[str, ...]
    default_container: str
    port_name: str
    port: int
    # False for MPIJob: Kubeflow defines a port but never appends it to the container.
    add_default_port: bool
    default_restart_policy: str
    controller_name: str
    framework: str
    # Replica types whose pods carry `job-role=master`.
    master_types: tuple[str, ...]
    # With none of `master_types` present, worker 0 plays the master role (TF, PyTorch, JAX).
    worker0_is_master_fallback: bool
    # Validation: replica types that must be present, and ones whose replicas must be exactly 1.
    required_types: tuple[str, ...] = ()
    single_replica_types: tuple[str, ...] = ()
    # At most one of these keys may be present (TF: Chief and Master are aliases).
    exclusive_types: tuple[str, ...] = ()
    # Non-single replica types whose replicas, when set, must be at least 1 (Kubeflow's PyTorch rule).
    positive_replica_types: tuple[str, ...] = ()
    default_replicas: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # The scale subresource points at `Worker` replicas (elastic kinds).
    scalable: bool = False
    # A warning returned on every admission of the kind.
    deprecated: str | None = None
    # Types whose single pod is named `<job>-<type>` without an index (the MPI launcher).
    unindexed_types: tuple[str, ...] = ()
    # Suffixes of further per-job children (`<job>-config` for MPI), for the name-length check.
    extra_child_suffixes: tuple[str, ...] = ()

    def replicas_default(self, rtype: str) -> int:
        return self.default_replicas.get(rtype, 1)

    def pod_name(self, job_name: str, rtype: str, index: int) -> str:
        if rtype in self.unindexed_types:
            return f"{job_name}-{rtype.lower()}"
        return f"{job_name}-{rtype.lower()}-{index}"

    def canonical_type(self, key: str) -> str | None:
        """The canonical spelling of a replica-map key, or None if the kind does not know it."""
        for rtype in self.replica_types:
            if rtype.lower() == key.lower():
                return rtype
        return None


TFJOB = KindInfo(
    kind="TFJob",
    plural="tfjobs",
    singular="tfjob",
    replica_field="tfReplicaSpecs",
    replica_types=("Chief", "Evaluator", "Master", "PS", "Worker"),
    default_container="tensorflow",
    port_name="tfjob-port",
    port=2222,
    add_default_port=True,
    default_restart_policy="Never",
    controller_name="tfjob-controller",
    framework="tensorflow",
    master_types=("Chief", "Master"),
    worker0_is_master_fallback=True,
    single_replica_types=("Chief", "Master"),
    exclusive_types=("Chief", "Master"),
)

PYTORCHJOB = KindInfo(
    kind="PyTorchJob",
    plural="pytorchjobs",
    singular="pytorchjob",
    replica_field="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="pytorch",
    port_name="pytorchjob-port",
    port=23456,
    add_default_port=True,
    default_restart_policy="OnFailure",
    controller_name="pytorchjob-controller",
    framework="pytorch",
    master_types=("Master",),
    worker0_is_master_fallback=True,
    single_replica_types=("Master",),
    positive_replica_types=("Worker",),
    scalable=True,
)

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
    required_types=("Master",),
    single_replica_types=("Master",),
)

MPIJOB = KindInfo(
    kind="MPIJob",
    plural="mpijobs",
    singular="mpijob",
    replica_field="mpiReplicaSpecs",
    replica_types=("Launcher", "Worker"),
    default_container="mpi",
    port_name="mpi-port",
    port=9999,
    add_default_port=False,
    default_restart_policy="Never",
    controller_name="mpijob-controller",
    framework="mpi",
    master_types=("Launcher",),
    worker0_is_master_fallback=False,
    required_types=("Launcher",),
    single_replica_types=("Launcher",),
    default_replicas=MappingProxyType({"Launcher": 1, "Worker": 0}),
    unindexed_types=("Launcher",),
    extra_child_suffixes=("config", "launcher"),
)

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
    scalable=True,
)

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
    scalable=True,
)

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
    single_replica_types=("Scheduler",),
    deprecated="MXJob was removed from Kubeflow Training Operator v1.9; served here with v1.8 semantics",
)

KINDS: Mapping[str, KindInfo] = MappingProxyType(
    {k.kind: k for k in (TFJOB, PYTORCHJOB, XGBOOSTJOB, MPIJOB, PADDLEJOB, JAXJOB, MXJOB)}
)
BY_PLURAL: Mapping[str, KindInfo] = MappingProxyType({k.plural: k for k in KINDS.values()})


class UnknownKindError(ValueError):
    pass


def kind_info(kind: str) -> KindInfo:
    try:
        return KINDS[kind]
    except KeyError:
        raise UnknownKindError(
            f"unknown kind {kind!r}; expected one of {', '.join(KINDS)} (apiVersion kubeflow.org/v1)"
        ) from None
