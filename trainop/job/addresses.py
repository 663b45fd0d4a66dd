"""Where a replica can be reached: one plan for a cluster, one for `trainop run` on loopback.

Every framework's environment (TF_CONFIG, MASTER_ADDR, WORKER_ADDRS, COORDINATOR_ADDRESS, PADDLE_*,
DMLC_*, MPI hostfiles) is built through a plan, so no code rewrites addresses after the fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from trainop.api.kinds import KindInfo


class AddressPlan(Protocol):
    def host(self, info: KindInfo, job_name: str, rtype: str, index: int) -> str:
        """The short host name other replicas use (a headless Service name on a cluster)."""
        ...

    def fqdn(self, info: KindInfo, job_name: str, namespace: str, rtype: str, index: int) -> str:
        """The fully qualified host name (TF_CONFIG uses it)."""
        ...

    def port(self, rtype: str, index: int, declared: int) -> int:
        """The port a replica listens on, given the port its pod template declares."""
        ...


@dataclass(frozen=True)
class ClusterAddresses:
    # CUSTOM_CLUSTER_DOMAIN in Kubeflow: appended to `<svc>.<ns>.svc` in TF_CONFIG.
    cluster_domain: str = ""

    def host(self, info: KindInfo, job_name: str, rtype: str, index: int) -> str:
        return info.pod_name(job_name, rtype, index)

    def fqdn(self, info: KindInfo, job_name: str, namespace: str, rtype: str, index: int) -> str:
        base = f"{info.pod_name(job_name, rtype, index)}.{namespace}.svc"
        return f"{base}.{self.cluster_domain}" if self.cluster_domain else base

    def port(self, rtype: str, index: int, declared: int) -> int:
        return declared


@dataclass(frozen=True)
class LocalAddresses:
    """Every replica on 127.0.0.1 with a port of its own, since they share one network namespace."""

    ports: Mapping[tuple[str, int], int] = field(default_factory=dict)
    loopback: str = "127.0.0.1"

    def host(self, info: KindInfo, job_name: str, rtype: str, index: int) -> str:
        return self.loopback

    def fqdn(self, info: KindInfo, job_name: str, namespace: str, rtype: str, index: int) -> str:
        return self.loopback

    def port(self, rtype: str, index: int, declared: int) -> int:
        try:
            return self.ports[(rtype, index)]
        except KeyError:
            raise KeyError(f"no local port was assigned to {rtype} {index}") from None
