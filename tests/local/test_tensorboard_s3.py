"""`trainop run --tensorboard` over an `s3://` log directory with `s3-endpoint`: TensorBoard without
TensorFlow reads the bucket through boto3 at that endpoint, as the image does with MinIO
(docs/tensorboard.md). The S3-compatible store is moto's server on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.local.runs import replica, write_job
from tests.local.tensorboards import LOSSES, SERVING_ON, BoardRun, api, s3_store, scalars, upload_losses
from trainop.extensions.tensorboard import ANNOTATION, ENDPOINT

PT = "PyTorchJob"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with s3_store(monkeypatch) as url:
        yield url


def test_tensorboard_reads_the_bucket_at_the_annotations_endpoint(tmp_path: Path, endpoint: str) -> None:
    upload_losses(endpoint, tmp_path / "events", "experiments", "run-7/master-0", tag="loss")
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
