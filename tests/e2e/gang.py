"""A control plane whose kube-scheduler does workload-aware gang scheduling (scheduling.k8s.io/v1alpha2
PodGroups, the GenericWorkload and GangScheduling feature gates on apiserver, controller manager and
scheduler), with trainop set up for `gangScheduler: kubernetes`, and a PyTorchJob gang of 1 Master + 3
Workers of 20 CPUs each: the one kwok node has 64, room for three."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainop_stack import IMAGE, TrainopStack, job, kwok_annotations

GATES = {"GenericWorkload": True, "GangScheduling": True}
API = "scheduling.k8s.io/v1alpha2"
CPUS_PER_POD = "20"  # the kwok node has 64: three fit, four do not


@contextmanager
def gang_stack(work: Path) -> Iterator[TrainopStack]:
    stack = TrainopStack(
        work, gang_scheduler="kubernetes", feature_gates=GATES, runtime_config=[f"{API}=true"]
    )
    with stack:
        yield stack.start()


def big_replica(replicas: int) -> dict[str, Any]:
    container = {
        "name": "pytorch",
        "image": IMAGE,
        "resources": {"requests": {"cpu": CPUS_PER_POD}, "limits": {"cpu": CPUS_PER_POD}},
    }
    return {
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": kwok_annotations(outcome=None, run_for=None)},
            "spec": {"containers": [container]},
        },
    }


def gang_job(name: str) -> dict[str, Any]:
    """Four pods of which only three fit on the first node."""
    return job("PyTorchJob", name, {"Master": big_replica(1), "Worker": big_replica(3)})
