"""The facts that describe one kind: names, replica types, ports and the validation rules that are data.

Each framework module under trainop.frameworks declares its kind's facts with this type; the registry
there is the one table of kinds. Every generic module reads these facts instead of branching on a kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


class UnknownKindError(ValueError):
    pass


@dataclass(frozen=True)
class ChildType:
    """A resource the hook returns as a child, with how Metacontroller updates an existing one."""

    api_version: str
    resource: str
    # OnDelete for objects the apiserver will not let us change (pods, a RoleBinding's roleRef),
    # InPlace for objects whose content follows the job.
    method: str | None = None

    def rule(self) -> dict[str, object]:
        """The CompositeController's childResources entry."""
        rule: dict[str, object] = {"apiVersion": self.api_version, "resource": self.resource}
        if self.method:
            rule["updateStrategy"] = {"method": self.method}
        return rule


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
    # With none of `master_types` present, `worker_type` 0 plays the master role (TF, PyTorch, JAX).
    worker0_is_master_fallback: bool
    # The replica type of the many interchangeable replicas: the scale subresource and elastic policies
    # address it, and the CRD documents its pod template in full.
    worker_type: str
    # Validation: replica types that must be present, and ones whose replicas must be exactly 1.
    required_types: tuple[str, ...] = ()
    single_replica_types: tuple[str, ...] = ()
    # At most one of these keys may be present (TF: Chief and Master are aliases).
    exclusive_types: tuple[str, ...] = ()
    # Non-single replica types whose replicas, when set, must be at least 1 (Kubeflow's PyTorch rule).
    positive_replica_types: tuple[str, ...] = ()
    default_replicas: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # The scale subresource points at `worker_type` replicas (elastic kinds).
    scalable: bool = False
    # A warning returned on every admission of the kind.
    deprecated: str | None = None
    # Types whose single pod is named `<job>-<type>` without an index (the MPI launcher).
    unindexed_types: tuple[str, ...] = ()
    # Suffixes of further per-job children (`<job>-config` for MPI), for the name-length check.
    extra_child_suffixes: tuple[str, ...] = ()
    # Children besides pods and services that the kind's hook returns. A child type not listed would be
    # created but never observed or cleaned up (docs/design.md#child-types-must-be-declared).
    extra_children: tuple[ChildType, ...] = ()
    # The framework's own server, which replicas of `server_types` may run instead of a program of the
    # user's (`trainop.dev/default-server.<type>: <default_server>`, docs/parameter-server.md); "" for
    # none. A cluster default gives it to `parameter_server_type` replicas that set no command.
    default_server: str = ""
    server_types: tuple[str, ...] = ()
    parameter_server_type: str | None = None

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
