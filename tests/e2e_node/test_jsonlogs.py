"""JSON logs on a real node: the PyTorch example (1 Master + 2 Workers) and the MPI example (a launcher's
mpirun over 2 Workers x 2 slots) applied with `trainop.dev/log-format: json`, as a user applies them,
trained to Succeeded; then every line of `kubectl logs` of every replica is a JSON record with the
documented fields (docs/json-logs.md), or native output in the one documented form (tests/jsonlogs_lines.py).

What it proves beyond the sitecustomize's own tests: the ConfigMap mount and PYTHONPATH work in a real
container of the examples' image, the downward API fills in the namespace, pod and node, and an MPI rank
that the launcher's mpirun starts in a worker pod through `kubectl exec` logs JSON with that worker's
identity and its Open MPI rank.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from trainop_stack import KINDS, Namespace

from tests.e2e_node.realnode import RealNodeStack
from tests.jsonlogs_lines import assert_documented, split_log
from trainop.examples import example as packaged
from trainop.extensions.jsonlogs.extension import ANNOTATION
from trainop.jsontypes import Json

# A 2-core machine runs every rank at once; the first pull of the 6 GB torch image adds ~2 min.
JOB_TIMEOUT = 600.0


@dataclass(frozen=True)
class Run:
    namespace: str
    job: dict[str, Any]  # as stored
    pods: dict[str, dict[str, Any]]
    records: dict[str, list[Json]]  # per pod: its training container's log, parsed
    native: dict[str, list[str]]


def run_with_json_logs(node_stack: RealNodeStack, folder: str) -> Iterator[Run]:
    """The packaged example with JSON logs on, applied in a namespace of its own, trained to Succeeded."""
    name = f"node-{uuid.uuid4().hex[:8]}"
    node_stack.cp.create_namespace(name)
    ns = Namespace(node_stack, name)
    documents = [d for d in yaml.safe_load_all(packaged(folder).document) if d]
    (job,) = [d for d in documents if d["kind"] in KINDS]
    job["metadata"].setdefault("annotations", {})[ANNOTATION] = "json"
    job_name = job["metadata"]["name"]
    ref = f"{KINDS[job['kind']]['plural']}/{job_name}"
    ns.apply(yaml.safe_dump_all(documents))
    try:
        ns.wait_for(ref, "Succeeded", timeout=JOB_TIMEOUT)
    except AssertionError as e:
        logs = {
            p: ns.kubectl("logs", p, "--all-containers", "--tail=40", check=False).stdout
            for p in ns.job_children("pods", job_name, live=False)
        }
        raise AssertionError(f"{e}\n{logs}") from None
    pods = ns.job_children("pods", job_name, live=False)
    records, native = {}, {}
    for pod_name, pod in pods.items():
        container = pod["spec"]["containers"][0]["name"]
        log = ns.kubectl("logs", pod_name, "-c", container).stdout
        launcher = pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "launcher"
        records[pod_name], native[pod_name] = split_log(log, trace=launcher)
    counts = ", ".join(f"{p}: {len(records[p])} records, {len(native[p])} native" for p in sorted(pods))
    print(f"\n[{folder}] kubectl logs with JSON logs on: {counts}")
    yield Run(name, ns.get(ref), pods, records, native)
    node_stack.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def pytorch(node_stack: RealNodeStack, training_images: None) -> Iterator[Run]:
    yield from run_with_json_logs(node_stack, "pytorch")


@pytest.fixture(scope="module")
def mpi(node_stack: RealNodeStack, training_images: None) -> Iterator[Run]:
    yield from run_with_json_logs(node_stack, "mpi")


def test_every_line_of_every_pytorch_replica_is_a_record_naming_its_pod(pytorch: Run) -> None:
    assert sorted(pytorch.records) == [
        f"pytorch-dist-digits-{r}" for r in ("master-0", "worker-0", "worker-1")
    ]
    for pod_name, records in pytorch.records.items():
        pod = pytorch.pods[pod_name]
        labels = pod["metadata"]["labels"]
        assert records, pod_name
        for record in records:
            assert_documented(record)
            assert (record["job"], record["namespace"], record["pod"], record["node"]) == (
                "pytorch-dist-digits",
                pytorch.namespace,
                pod_name,
                pod["spec"]["nodeName"],
            )
            assert record["replica_type"] == labels["training.kubeflow.org/replica-type"]
            assert record["replica_index"] == int(labels["training.kubeflow.org/replica-index"])


def test_each_pytorch_replica_reports_its_rank_and_the_world_size(pytorch: Run) -> None:
    ranks = {pod: {(r["rank"], r["world_size"]) for r in records} for pod, records in pytorch.records.items()}
    assert ranks == {
        "pytorch-dist-digits-master-0": {(0, 3)},
        "pytorch-dist-digits-worker-0": {(1, 3)},
        "pytorch-dist-digits-worker-1": {(2, 3)},
    }


def test_the_pytorch_examples_prints_are_info_records_of_stdout(pytorch: Run) -> None:
    master = pytorch.records["pytorch-dist-digits-master-0"]
    success = [r for r in master if r["message"].startswith("rank 0/3: test accuracy ")]
    assert [(r["level"], r["logger"]) for r in success] == [("INFO", "stdout")], master


def test_the_pytorch_job_stores_the_annotation_it_ran_with(pytorch: Run) -> None:
    assert pytorch.job["metadata"]["annotations"][ANNOTATION] == "json"


def test_mpi_ranks_started_in_the_workers_log_json_with_the_workers_identity(mpi: Run) -> None:
    launcher = mpi.records["mpi-dist-cancer-launcher"]
    assert launcher
    for record in launcher:
        assert_documented(record)
        assert (record["job"], record["namespace"], record["replica_type"], record["world_size"]) == (
            "mpi-dist-cancer",
            mpi.namespace,
            "worker",
            4,
        )
        assert record["pod"] == f"mpi-dist-cancer-worker-{record['replica_index']}"
        assert record["node"] == mpi.pods[record["pod"]]["spec"]["nodeName"]
    # 2 slots per worker: ranks 0 and 1 on worker-0, 2 and 3 on worker-1 (mpirun's default by slot).
    placed = {(r["rank"], r["local_rank"], r["pod"]) for r in launcher}
    assert placed == {
        (0, 0, "mpi-dist-cancer-worker-0"),
        (1, 1, "mpi-dist-cancer-worker-0"),
        (2, 0, "mpi-dist-cancer-worker-1"),
        (3, 1, "mpi-dist-cancer-worker-1"),
    }


def test_mpi_rank_0s_success_line_is_a_record(mpi: Run) -> None:
    launcher = mpi.records["mpi-dist-cancer-launcher"]
    success = [r for r in launcher if r["rank"] == 0 and r["message"].startswith("rank 0/4: test accuracy ")]
    assert [(r["level"], r["logger"]) for r in success] == [("INFO", "stdout")], launcher


def test_every_ranks_two_lines_reached_the_launchers_log_as_records(mpi: Run) -> None:
    # The launcher's log also holds kubexec.sh's interleaved traces (tests/jsonlogs_lines.py), so what
    # proves that no Python line escaped there is that each rank's two prints are both records.
    launcher = mpi.records["mpi-dist-cancer-launcher"]
    lines = sorted((r["rank"], r["message"].split(":")[1].split()[0]) for r in launcher)
    assert lines == sorted((rank, kind) for rank in range(4) for kind in ("shard", "test")), launcher


def test_beside_the_records_only_the_launchers_kubexec_trace_passes_unparsed(mpi: Run) -> None:
    # mpirun and the workers' sleep are native and silent when all goes well; kubexec.sh traces the
    # `kubectl exec` it runs into each worker (`set -x`, as Kubeflow's script does).
    assert {pod: lines for pod, lines in mpi.native.items() if pod != "mpi-dist-cancer-launcher"} == {
        pod: [] for pod in mpi.pods if pod != "mpi-dist-cancer-launcher"
    }
    # The shell writes each traced word in one piece, so a worker's name survives the interleaving (the
    # launcher's own name is in the traced orted command line too, so only the workers are counted).
    traced = "\n".join(mpi.native["mpi-dist-cancer-launcher"])
    assert "/opt/kube/kubectl" in traced
    workers = {pod for pod in mpi.pods if pod != "mpi-dist-cancer-launcher"}
    assert workers == {"mpi-dist-cancer-worker-0", "mpi-dist-cancer-worker-1"}
    assert {pod for pod in workers if pod in traced} == workers
