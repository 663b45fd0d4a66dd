"""The TensorBoard image (tensorboard-image/, hack/build-tensorboard-image.sh) as a job's TensorBoard
Deployment runs it: the container exactly as the hook returns it (image, arguments, path prefix, uid
65532, no capabilities) over an `s3://` directory at a custom endpoint, which boto3 reaches without
TensorFlow; TensorBoard's HTTP API under the prefix returns the scalars in the bucket. The S3-compatible
store is moto's server on loopback, standing in for MinIO."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.images import run_command, run_pod
from tests.local.tensorboards import LOSSES, S3_CREDENTIALS, api, s3_store, scalars, upload_losses
from trainop.extensions.base import JobState
from trainop.extensions.tensorboard import ANNOTATION, ENDPOINT, PORT, TensorBoard
from trainop.frameworks import KINDS
from trainop.job.context import JobContext
from trainop.job.settings import Settings
from trainop.local.ports import free_ports

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tensorboard_image() -> str:
    done = subprocess.run(
        ["bash", str(REPO / "hack" / "build-tensorboard-image.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    ref = done.stdout.strip()
    assert ref.startswith("docker.io/library/trainop-tensorboard:src-"), done.stdout
    return ref


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with s3_store(monkeypatch) as url:
        yield url


def tensorboard_pod(image: str, values: dict[str, str], port: int) -> dict[str, Any]:
    """The pod of the TensorBoard Deployment the hook returns for job `j` in `team-a`, listening on `port`
    (the container shares this machine's network here)."""
    job = {"kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "team-a"}, "spec": {}}
    ctx = JobContext(KINDS["PyTorchJob"], job, Settings())
    state = JobState(finished_at=None, now=datetime.now(UTC))
    children = TensorBoard({"TRAINOP_TENSORBOARD_IMAGE": image}).children(ctx, values, state).children
    (deployment,) = [c for c in children if c["kind"] == "Deployment"]
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == image
    container["args"] = [f"--port={port}" if a == f"--port={PORT}" else a for a in container["args"]]
    return pod


def test_the_image_has_no_tensorflow(tensorboard_image: str) -> None:
    probe = "import importlib.util as u; print(u.find_spec('tensorflow'), u.find_spec('boto3') is not None)"
    assert run_command(tensorboard_image, ["python3", "-c", probe]).split() == ["None", "True"]


def test_tensorboard_reads_s3_at_the_annotations_endpoint_under_its_path_prefix(
    tensorboard_image: str, endpoint: str, tmp_path: Path
) -> None:
    upload_losses(endpoint, tmp_path, "experiments", "run-7/master-0", tag="train/loss")
    (port,) = free_ports(1)
    pod = tensorboard_pod(tensorboard_image, {ANNOTATION: "s3://experiments/run-7", ENDPOINT: endpoint}, port)
    with run_pod(tensorboard_image, pod, name="trainop-test-tensorboard", env=S3_CREDENTIALS) as container:
        container.wait_ready(port, timeout=120)
        url = f"http://127.0.0.1:{port}/tensorboard/team-a/j/"
        assert api(url, "data/environment")["data_location"] == "s3://experiments/run-7"
        series = scalars(url, "master-0", "train/loss", points=len(LOSSES))
        assert [(step, value) for _, step, value in series] == list(enumerate(LOSSES, start=1)), (
            container.logs()[-3000:]
        )
