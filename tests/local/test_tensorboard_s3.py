"""`trainop run --tensorboard` over an `s3://` log directory with `s3-endpoint`: TensorBoard without
TensorFlow reads the bucket through boto3 at that endpoint, as the image does with MinIO
(docs/tensorboard.md). The S3-compatible store is moto's server on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml
from moto.server import ThreadedMotoServer

from tests.local.runs import replica, write_job
from tests.local.tensorboards import SERVING_ON, BoardRun, api, scalars
from trainop.extensions.tensorboard import ANNOTATION, ENDPOINT
from trainop.local.ports import free_ports

PT = "PyTorchJob"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}
LOSSES = [2.0, 1.0, 0.5]


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    (port,) = free_ports(1)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def event_file(folder: Path) -> Path:
    """The event file of a `loss` series written by torch's SummaryWriter, as the examples write it."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    for step, loss in enumerate(LOSSES, start=1):
        writer.add_scalar("loss", loss, step)
    writer.close()
    (path,) = folder.glob("events.out.tfevents.*")
    return path


def test_tensorboard_reads_the_bucket_at_the_annotations_endpoint(tmp_path: Path, endpoint: str) -> None:
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket="experiments")
    events = event_file(tmp_path / "events")
    s3.upload_file(str(events), "experiments", f"run-7/master-0/{events.name}")
    path = write_job(tmp_path, PT, Master=replica(PT, [sys.executable, "-c", "pass"]))
    job = yaml.safe_load(path.read_text())
    job["metadata"]["annotations"] = {ANNOTATION: "s3://experiments/run-7", ENDPOINT: endpoint}
    path.write_text(yaml.safe_dump(job))

    run = BoardRun.start(str(path), "--workdir", str(tmp_path / "run"))
    try:
        run.wait_for(SERVING_ON, timeout=120)
        assert api(run.url(), "data/environment")["data_location"] == "s3://experiments/run-7"
        series = scalars(run.url(), "master-0", "loss", points=len(LOSSES))
        assert [(step, value) for _, step, value in series] == list(enumerate(LOSSES, start=1))
        assert run.interrupt() == 0
    finally:
        run.proc.kill()
