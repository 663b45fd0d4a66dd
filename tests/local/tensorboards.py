"""Driving `trainop run --tensorboard` from a test: the run in a subprocess, its output read as it comes,
TensorBoard's own HTTP API asked over the URL the run printed."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.local.runs import start
from trainop.local.ports import free_ports

URL = re.compile(r"^TensorBoard: (?P<url>http://127\.0\.0\.1:\d+/) ")
SERVING_ON = "TensorBoard keeps serving"


@dataclass
class BoardRun:
    """A `trainop run --tensorboard` in progress; every line of its stdout so far is in `lines`."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)

    @classmethod
    def start(cls, *args: str) -> BoardRun:
        run = cls(start(*args, "--tensorboard"))
        threading.Thread(target=run._pump, daemon=True).start()
        threading.Thread(target=run._drain_errors, daemon=True).start()
        return run

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _drain_errors(self) -> None:
        # Read as it comes, so a chatty stderr never fills the pipe and blocks the run.
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errors.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> str:
        """The first line containing `text`; fails with the output so far when the run ends or `timeout`
        passes first."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.proc.kill()
                output = "\n".join([*self.lines[-80:], "--- stderr:", *self.errors[-40:]])
                raise AssertionError(f"no line with {text!r}; output:\n{output}")
            self.lines.append(line)
            if text in line:
                return line

    def url(self) -> str:
        for line in self.lines:
            match = URL.match(line)
            if match:
                return match["url"]
        raise AssertionError("no TensorBoard URL printed:\n" + "\n".join(self.lines))

    def interrupt(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        finally:
            self.proc.kill()


def api(url: str, path: str, **query: str) -> Any:
    """GET `path` of TensorBoard's HTTP API at `url`, parsed."""
    address = f"{url.rstrip('/')}/{path}"
    if query:
        address += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(address, timeout=30) as response:
        return json.loads(response.read())


def scalars(url: str, run: str, tag: str, points: int, timeout: float = 120) -> list[list[float]]:
    """The [wall time, step, value] series of `tag` in `run`, once TensorBoard has loaded `points` of it
    (it reloads the directory every few seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        tags = api(url, "data/plugin/scalars/tags")
        if tag in tags.get(run, {}):
            series: list[list[float]] = api(url, "data/plugin/scalars/scalars", run=run, tag=tag)
            if len(series) >= points or time.monotonic() > deadline:
                return series
        elif time.monotonic() > deadline:
            raise AssertionError(f"TensorBoard has no {tag!r} in {run!r}: {tags}")
        time.sleep(1)


# An S3-compatible store on loopback (moto's server) standing in for MinIO, with these credentials.
S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}
LOSSES = [2.0, 1.0, 0.5]


@contextmanager
def s3_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A running S3-compatible server on a free loopback port, its credentials in this process's
    environment (and so in the subprocesses'); its endpoint URL."""
    from moto.server import ThreadedMotoServer

    for name, value in S3_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    (port,) = free_ports(1)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def upload_losses(endpoint: str, folder: Path, bucket: str, key_prefix: str, tag: str) -> None:
    """LOSSES as the `tag` series of an event file written by torch's SummaryWriter (as the examples
    write theirs), uploaded to `bucket` under `key_prefix`."""
    import boto3
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    for step, loss in enumerate(LOSSES, start=1):
        writer.add_scalar(tag, loss, step)
    writer.close()
    (events,) = folder.glob("events.out.tfevents.*")
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket=bucket)
    s3.upload_file(str(events), bucket, f"{key_prefix}/{events.name}")
