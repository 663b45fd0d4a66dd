"""Which gang scheduler a setting names: the facts the PodGroup child and the install manifests share."""

from __future__ import annotations

from typing import Final

VOLCANO: Final = "volcano"
KUBERNETES: Final = "kubernetes"
PLUGINS: Final = "scheduler-plugins"
KUBERNETES_API: Final = "scheduling.k8s.io/v1alpha2"


def family(scheduler: str) -> str:
    """Which PodGroup API a gang scheduler setting means: VOLCANO, KUBERNETES or PLUGINS (any other name
    is scheduler-plugins' coscheduling scheduler, as Kubeflow's `--gang-scheduler-name`)."""
    lowered = scheduler.lower()
    return lowered if lowered in (VOLCANO, KUBERNETES) else PLUGINS
