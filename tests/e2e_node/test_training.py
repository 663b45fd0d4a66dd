"""Real distributed training through the operator: every packaged example (trainop/examples/) applied
as a user does, ``trainop examples show NAME | kubectl apply -f -`` (its script's ConfigMap, then the job),
its pods real containers of the framework's generic image built from training-images/Dockerfile, to
``Succeeded`` with the training's own success line in ``kubectl logs``.

The job goes through everything a cluster has: our admission webhooks, Metacontroller calling our sync
hooks, the scheduler, the kubelet pulling ``trainop-examples/<folder>:latest`` from the tier's registry,
CoreDNS resolving the operator's per-replica Services, kube-proxy for the MPI launcher's in-cluster
``kubectl exec``. What each example printed is echoed into the test output (``-s`` shows it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from trainop_stack import KINDS, Namespace

from tests.e2e_node.realnode import RealNodeStack
from trainop.examples import example as packaged

# A 2-core machine runs every rank at once; the first pull of the 6 GB torch image adds ~2 min.
JOB_TIMEOUT = 600.0


@dataclass(frozen=True)
class Example:
    folder: str
    pod: str  # the pod whose log carries the result (Kubeflow names: <job>-<type>-<index>, <job>-launcher)
    success: str  # regex of the success line, with a `value` group when there is a figure to check
    target: float | None = None


ACCURACY = r"test accuracy (?P<value>[0-9.]+)"
EXAMPLE_RESULTS = [
    Example("pytorch", "pytorch-dist-digits-master-0", rf"rank 0/3: {ACCURACY} \(target 0\.90\)", 0.90),
    Example(
        "xgboost",
        "xgboost-dist-cancer-master-0",
        rf"rank 0/3: {ACCURACY} \(target 0\.93\), same model on all ranks: True",
        0.93,
    ),
    Example(
        "jax",
        "jax-dist-diabetes-worker-0",
        r"process 0/2: test R\^2 (?P<value>[0-9.]+) \(target 0\.30\)",
        0.30,
    ),
    Example(
        "mpi",
        "mpi-dist-cancer-launcher",
        rf"rank 0/4: {ACCURACY} \(target 0\.93\), ranks \[1\.0, 1\.0, 1\.0, 1\.0\]",
        0.93,
    ),
    Example("tensorflow", "tf-rendezvous-worker-0", r"worker:0 heard from ps:0, worker:1"),
    Example("mxnet", "mx-rendezvous-scheduler-0", r"scheduler:0 heard from server:0, worker:0, worker:1"),
    Example(
        "paddle",
        "paddle-rendezvous-master-0",
        r"roster paddle-rendezvous-master-0, paddle-rendezvous-worker-0, paddle-rendezvous-worker-1",
    ),
]


def example_document(name: str) -> tuple[str, dict[str, Any]]:
    """What `trainop examples show NAME` prints, and the job in it."""
    document = packaged(name).document
    (job,) = [d for d in yaml.safe_load_all(document) if d and d["kind"] in KINDS]
    return document, job


def plural(obj: dict[str, Any]) -> str:
    return str(KINDS[obj["kind"]]["plural"])


def job_logs(ns: Namespace, job: str) -> str:
    """Every container log of the job's pods, for a failure message."""
    out = []
    for name in sorted(ns.job_children("pods", job, live=False)):
        res = ns.kubectl("logs", name, "--all-containers", "--tail=30", check=False)
        out.append(f"--- {name}\n{res.stdout}{res.stderr}")
    return "\n".join(out)


@pytest.mark.usefixtures("training_images")
@pytest.mark.parametrize("example", EXAMPLE_RESULTS, ids=lambda e: e.folder)
def test_example_trains_to_its_target(
    ns: Namespace, example: Example, capsys: pytest.CaptureFixture[str]
) -> None:
    document, obj = example_document(example.folder)
    name = obj["metadata"]["name"]
    ref = f"{plural(obj)}/{name}"
    # Exactly what a user runs: `trainop examples show NAME | kubectl apply -f -`.
    ns.apply(document)
    try:
        ns.wait_for(ref, "Succeeded", timeout=JOB_TIMEOUT)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{job_logs(ns, name)}") from None
    logs = ns.kubectl("logs", example.pod).stdout
    match = re.search(example.success, logs)
    assert match, f"no success line /{example.success}/ in kubectl logs {example.pod}:\n{logs}"
    with capsys.disabled():
        print(f"\n[{example.folder}] kubectl logs {example.pod}: {match.group(0)}")
    if example.target is not None:
        assert float(match["value"]) >= example.target


@pytest.mark.usefixtures("training_images")
def test_a_job_whose_replicas_cannot_reach_each_other_fails_instead_of_hanging(
    node_stack: RealNodeStack, ns: Namespace
) -> None:
    # The TensorFlow example unchanged, on a pod network that refuses its TF_CONFIG port (2222): each
    # task gives up after the rendezvous' own 120 s timeout and exits non-zero, and with restartPolicy
    # Never the failed worker fails the job.
    document, obj = example_document("tensorflow")
    with node_stack.node.partition(int(KINDS["TFJob"]["port"][1])):
        ns.apply(document)
        ns.wait_for(f"tfjobs/{obj['metadata']['name']}", "Failed", timeout=300)
    state = ns.get("pod/tf-rendezvous-worker-0")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] != 0
    logs = ns.kubectl("logs", "tf-rendezvous-worker-0").stdout
    assert "worker:0 listening on" in logs and "heard from" not in logs, logs
