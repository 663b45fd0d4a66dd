"""trainop's JobSet for a TrainJob is the JobSet Kubeflow Trainer v2.3.0's own controller makes.

Kueue rebuilds a TrainJob's JobSet with Trainer's library to size its quota and place it, so the JobSet
trainop's hook returns must be Trainer's, field for field. Each case gives Trainer's controller a runtime
and a TrainJob on the real apiserver (its webhooks default and check them), then builds ours with
`trainop.trainjob.build.desired_jobset` from the TrainJob and runtime as stored, has the apiserver store it
too (a server-side dry run, so the CRD's defaults apply to both alike) and compares labels, annotations
and spec.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from trainer_controller import running_trainer, shipped_runtimes
from trainop_stack import Namespace, TrainopStack

from tests.trainjob.builders import (
    container,
    patch,
    replicated_job,
    runtime,
    torch_runtime,
    train_job,
    trainer_step,
)
from trainop.trainjob.build import desired_jobset

pytestmark = pytest.mark.e2e

Json = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def trainer(stack: TrainopStack) -> Iterator[None]:
    with running_trainer(stack.cp):
        stack.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": list(shipped_runtimes().values())}
            ),
        )
        yield


@dataclass(frozen=True)
class Case:
    id: str
    runtime: Callable[[], Json]
    job: Callable[[str], Json]


def shipped(name: str) -> Callable[[], Json]:
    return lambda: shipped_runtimes()[name]


def namespaced(rt: Json) -> Json:
    rt = copy.deepcopy(rt)
    rt["kind"] = "TrainingRuntime"
    rt["metadata"].pop("namespace", None)
    return rt


def with_initializers() -> Json:
    mount = [{"name": "initializer", "mountPath": "/workspace"}]
    volume = [{"name": "initializer", "emptyDir": {}}]

    def step(name: str) -> Json:
        rjob = replicated_job(name, container(name, volumeMounts=mount), ancestor=name)
        rjob["template"]["spec"]["template"]["spec"]["volumes"] = volume
        return rjob

    node = trainer_step(container("node", volumeMounts=mount))
    node["template"]["spec"]["template"]["spec"]["volumes"] = volume
    node["dependsOn"] = [
        {"name": "dataset-initializer", "status": "Complete"},
        {"name": "model-initializer", "status": "Complete"},
    ]
    return namespaced(torch_runtime(step("dataset-initializer"), step("model-initializer"), node))


def with_env_injection() -> Json:
    node = trainer_step(
        container(
            "node", ports=[{"name": "metrics", "containerPort": 8080}], env=[{"name": "LOG", "value": "info"}]
        )
    )
    node["template"]["spec"]["template"]["spec"]["initContainers"] = [container("preflight")]
    rt = torch_runtime(
        node, num_nodes=2, envInjection={"targets": [{"jobName": "node", "containerNames": ["preflight"]}]}
    )
    rt["spec"]["template"]["metadata"] = {"labels": {"team": "vision"}, "annotations": {"owner": "a"}}
    return namespaced(rt)


def plain() -> Json:
    return namespaced(runtime(replicated_job("prep", container("prep"), parallelism=2), trainer_step()))


KUEUE_PATCH = patch(
    "kueue.x-k8s.io/manager",
    metadata={"labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
    spec={
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "metadata": {"labels": {"flavor": "spot"}},
                    "spec": {
                        "template": {
                            "spec": {
                                "nodeSelector": {"cloud.example.com/zone": "a"},
                                "tolerations": [
                                    {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
                                ],
                                "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                            }
                        }
                    },
                },
            }
        ]
    },
)

CASES = [
    Case("torch-shipped-defaults", shipped("torch-distributed"), lambda n: train_job(n, "torch-distributed")),
    Case(
        "torch-shipped-overrides",
        shipped("torch-distributed"),
        lambda n: train_job(
            n,
            "torch-distributed",
            trainer={
                "numNodes": 3,
                "image": "ghcr.io/example/mnist:1",
                "command": ["torchrun", "train.py"],
                "args": ["--epochs", "2"],
                "env": [{"name": "EPOCHS", "value": "2"}],
            },
        ),
    ),
    Case(
        "torch-cpu-resources",
        shipped("torch-distributed"),
        lambda n: train_job(
            n,
            "torch-distributed",
            trainer={
                "resourcesPerNode": {"requests": {"cpu": "3", "memory": "2Gi"}, "limits": {"cpu": "3500m"}}
            },
        ),
    ),
    Case(
        "torch-gpus",
        shipped("torch-distributed"),
        lambda n: train_job(
            n,
            "torch-distributed",
            trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}}},
        ),
    ),
    Case(
        "torch-nproc",
        shipped("torch-distributed"),
        lambda n: train_job(n, "torch-distributed", trainer={"numProcPerNode": 4}),
    ),
    Case(
        "jax-shipped",
        shipped("jax-distributed"),
        lambda n: train_job(
            n, "jax-distributed", trainer={"numNodes": 2, "env": [{"name": "XLA_FLAGS", "value": "--x"}]}
        ),
    ),
    # No trainer env here: Trainer runs its plain and XGBoost plugins in map order, so its env order varies.
    Case(
        "xgboost-shipped",
        shipped("xgboost-distributed"),
        lambda n: train_job(
            n,
            "xgboost-distributed",
            trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}},
        ),
    ),
    Case(
        "plain-namespaced",
        plain,
        lambda n: train_job(
            n, "case-plain-namespaced", trainer={"numNodes": 2, "env": [{"name": "A", "value": "1"}]}
        ),
    ),
    Case(
        "kueue-patch-suspended",
        shipped("torch-distributed"),
        lambda n: train_job(
            n, "torch-distributed", trainer={"numNodes": 2}, suspend=True, runtimePatches=[KUEUE_PATCH]
        ),
    ),
    Case(
        "initializers",
        with_initializers,
        lambda n: train_job(
            n,
            "case-initializers",
            trainer={},
            initializer={
                "dataset": {
                    "storageUri": "hf://tatsu-lab/alpaca",
                    "env": [{"name": "SPLIT", "value": "train"}],
                    "secretRef": {"name": "hf"},
                },
                "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B"},
            },
        ),
    ),
    Case(
        "env-injection",
        with_env_injection,
        lambda n: train_job(n, "case-env-injection", trainer={"env": [{"name": "LOG", "value": "debug"}]}),
    ),
]


def comparable(jobset: Json) -> Json:
    meta = jobset["metadata"]
    return {"labels": meta.get("labels"), "annotations": meta.get("annotations"), "spec": jobset["spec"]}


def stored_runtime(ns: Namespace, rt: Json) -> Json:
    if rt["kind"] == "TrainingRuntime":
        return ns.get(f"trainingruntime/{rt['metadata']['name']}")
    got: Json = json.loads(
        ns.stack.kubectl("get", f"clustertrainingruntime/{rt['metadata']['name']}", "-o", "json").stdout
    )
    return got


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_our_jobset_is_trainers(namespace: Namespace, case: Case) -> None:
    ns = namespace
    rt = case.runtime()
    if rt["kind"] == "TrainingRuntime":
        rt["metadata"]["name"] = f"case-{case.id}"
        ns.apply(rt)
    job = case.job("train")
    job["spec"]["runtimeRef"]["kind"] = rt["kind"]
    job["metadata"].pop("namespace")
    job["metadata"].pop("uid")
    ns.create(job)
    ns.wait_until("Trainer's JobSet", lambda: ns.exists("jobset/train"), timeout=60)

    theirs = ns.get("jobset/train")
    ours = desired_jobset(ns.get("trainjob/train"), stored_runtime(ns, rt))
    ours["metadata"]["name"] = "ours"
    stored_ours: Json = json.loads(
        ns.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(ours)).stdout
    )

    diffs = differences(comparable(stored_ours), comparable(theirs))
    assert not diffs, "ours and Trainer's JobSets differ:\n" + "\n".join(diffs)


def differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Every path where the two differ, with both values: a readable failure for a deep JobSet.

    Order-sensitive, unlike tests/differential/diff.py's keyed flattening: the order of a container's env
    is part of what Kueue's copy of the JobSet must match."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return [
            d
            for k in sorted(ours.keys() | theirs.keys())
            for d in differences(ours.get(k), theirs.get(k), f"{path}.{k}")
        ]
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [
            d
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path}: ours {json.dumps(ours)} != Trainer's {json.dumps(theirs)}"]
