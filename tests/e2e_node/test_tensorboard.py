"""A job's TensorBoard, served for real: the PyTorch example with `trainop.dev/tensorboard` on a
PersistentVolumeClaim, every rank writing its scalars there through TENSORBOARD_LOG_DIR, and the
TensorBoard Deployment the hook adds (the trainop-tensorboard image, the chart's default, from
hack/build-tensorboard-image.sh) answering its own HTTP API through its Service with the loss series the
job wrote.

The node has no provisioner: the claim is bound statically to a hostPath PersistentVolume over a folder
of this machine, which the test also reads to compare with what TensorBoard returns.
"""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainop_stack import Namespace

from tests.e2e_node.realnode import RealNodeStack
from tests.e2e_node.test_training import JOB_TIMEOUT, example_document, job_logs
from trainop.extensions.tensorboard import ANNOTATION

CLAIM = "tb-logs"
SUB_PATH = "run-1"
EPOCHS = 60  # trainop/examples/pytorch/train.py
RANKS = ("master-0", "worker-0", "worker-1")


@pytest.fixture
def log_volume(node_stack: RealNodeStack, ns: Namespace, tmp_path: Path) -> Iterator[Path]:
    """A claim in `ns` bound to a hostPath volume over a folder of this machine; the folder."""
    folder = tmp_path / "volume"
    # Created here, readable by all: the kubelet would make the sub-path 0750 root, and TensorBoard runs
    # as uid 65532.
    (folder / SUB_PATH).mkdir(parents=True)
    for path in (folder, folder / SUB_PATH):
        os.chmod(path, 0o755)
    volume = f"tb-{uuid.uuid4().hex[:8]}"
    node_stack.kubectl("apply", "-f", "-", input=yaml.safe_dump(persistent_volume(volume, folder, ns.name)))
    try:
        ns.apply(claim(volume))
        ns.wait_until(
            "the claim to bind", lambda: ns.get(f"pvc/{CLAIM}")["status"].get("phase") == "Bound", timeout=60
        )
        yield folder
    finally:
        ns.kubectl("delete", "pvc", CLAIM, "--wait=false", check=False)
        node_stack.kubectl("delete", "pv", volume, "--wait=false", check=False)


def persistent_volume(name: str, folder: Path, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": str(folder), "type": "Directory"},
            "claimRef": {"namespace": namespace, "name": CLAIM},
        },
    }


def claim(volume: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": CLAIM},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def with_tensorboard(document: str) -> str:
    """`trainop examples show pytorch` with the annotation on its job."""
    docs = [d for d in yaml.safe_load_all(document) if d]
    for doc in docs:
        if doc["kind"] == "PyTorchJob":
            doc["metadata"].setdefault("annotations", {})[ANNOTATION] = f"pvc://{CLAIM}/{SUB_PATH}"
    return yaml.safe_dump_all(docs)


def api(base: str, path: str, **query: str) -> Any:
    address = f"{base}/{path}" + ("?" + urllib.parse.urlencode(query) if query else "")
    with urllib.request.urlopen(address, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.usefixtures("training_images")
def test_tensorboard_serves_the_loss_series_the_pytorch_example_wrote(
    ns: Namespace, log_volume: Path
) -> None:
    document, obj = example_document("pytorch")
    name = obj["metadata"]["name"]
    ns.apply(with_tensorboard(document))
    try:
        ns.wait_for(f"pytorchjobs/{name}", "Succeeded", timeout=JOB_TIMEOUT)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{job_logs(ns, name)}") from None
    # Every rank wrote its own directory on the claim.
    written = {p.parent.name for p in (log_volume / SUB_PATH).glob("*/events.out.tfevents.*")}
    assert written == set(RANKS)

    board = f"{name}-tensorboard"
    ns.wait_until(
        "TensorBoard to be ready",
        lambda: ns.get(f"deployment/{board}").get("status", {}).get("readyReplicas") == 1,
        timeout=180,
    )
    service = ns.get(f"service/{board}")
    base = f"http://{service['spec']['clusterIP']}:80/tensorboard/{ns.name}/{name}"
    loaded: dict[str, list[list[float]]] = {}

    def every_epoch_loaded() -> bool:
        for rank in RANKS:
            try:
                loaded[rank] = api(base, "data/plugin/scalars/scalars", run=rank, tag="train/loss")
            except OSError:
                # Not loaded yet (TensorBoard answers 400 for a run it has not seen) or the Service's
                # endpoints not programmed yet.
                return False
        return all(len(series) == EPOCHS for series in loaded.values())

    ns.wait_until("TensorBoard to load every epoch of every rank", every_epoch_loaded, timeout=120)
    for rank in RANKS:
        assert [step for _, step, _ in loaded[rank]] == list(range(1, EPOCHS + 1))
        losses = [value for _, _, value in loaded[rank]]
        assert losses[-1] < losses[0] / 5, (rank, losses)
    ((_, step, accuracy),) = api(base, "data/plugin/scalars/scalars", run="master-0", tag="test/accuracy")
    assert step == EPOCHS and accuracy >= 0.90
    assert api(base, "data/environment")["data_location"] == "/var/run/trainop/tensorboard"
