"""The sync's settings: what Kubeflow exposes as controller flags (the hook server reads them from its
environment once, with the rest of hooks.settings.HookSettings; `trainop run` sets its own)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainop.envvalues import PositiveInt, Text
from trainop.job.addresses import AddressPlan, ClusterAddresses


@dataclass(frozen=True)
class Settings:
    addresses: AddressPlan = field(default_factory=ClusterAddresses)
    # Add the init containers that wait for cluster DNS (PyTorch workers wait for the master).
    wait_for_dns: bool = True
    pytorch_init_image: str = "alpine:3.10"
    pytorch_init_max_tries: int = 100
    mpi_kubectl_delivery_image: str = "ghcr.io/kubeflow/training-v1/kubectl-delivery:latest"
    # "" = no gang scheduling; "volcano" = Volcano PodGroups; anything else = scheduler-plugins name.
    gang_scheduler: str = ""
    # How soon to come back after dropping a failed pod so that it is recreated promptly.
    restart_resync_seconds: float = 1.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        return cls(
            addresses=ClusterAddresses(cluster_domain=Text("CUSTOM_CLUSTER_DOMAIN", "").read(env)),
            pytorch_init_image=Text("TRAINOP_PYTORCH_INIT_IMAGE", cls.pytorch_init_image).read(env),
            pytorch_init_max_tries=PositiveInt(
                "TRAINOP_PYTORCH_INIT_MAX_TRIES", cls.pytorch_init_max_tries
            ).read(env),
            mpi_kubectl_delivery_image=Text(
                "TRAINOP_MPI_KUBECTL_DELIVERY_IMAGE", cls.mpi_kubectl_delivery_image
            ).read(env),
            gang_scheduler=Text("TRAINOP_GANG_SCHEDULER", "").read(env),
        )
