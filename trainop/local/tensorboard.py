"""`trainop run --tensorboard`: TensorBoard over the run's log directory, on a free loopback port.

A job without `trainop.dev/tensorboard` writes into `tensorboard/` of the run's folder (one sub-directory
per pod, as on a cluster: trainop.extensions.tensorboard.with_local_log_dir); a job with an `s3://` or
`gs://` annotation is served from there, with the annotation's S3 endpoint. TensorBoard is this
machine's process, outside the replicas' loopback-only namespace, so a browser here reaches it; it
listens on 127.0.0.1 only. docs/tensorboard.md says how long it serves.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from trainop.extensions import tensorboard as extension
from trainop.jsontypes import Json
from trainop.local.ports import free_ports

LOG_DIR = "tensorboard"
LOG_FILE = "tensorboard.log"
MISSING = "--tensorboard needs TensorBoard in this Python ({python}): pip install tensorboard"
# TensorBoard as the image runs it, without TensorFlow even where this Python has it: TensorFlow's file
# systems have no s3:// (TensorBoard's own, through boto3, do). The module tensorboard.compat.notf is
# TensorBoard's switch for that: where it imports, TensorBoard uses its stub instead of TensorFlow.
WITHOUT_TENSORFLOW = (
    "import sys, types; "
    "sys.modules['tensorboard.compat.notf'] = types.ModuleType('tensorboard.compat.notf'); "
    "from tensorboard.main import run_main; run_main()"
)
# TensorBoard imports its plugins before it listens: seconds, more on a loaded machine.
READY_TIMEOUT = 120.0


class TensorBoardError(Exception):
    """TensorBoard cannot serve this run; the message says why and what to do."""


def installed() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def prepare(job: Json, workdir: Path) -> tuple[Json, str, dict[str, str]]:
    """(the job as it runs, the directory TensorBoard serves, TensorBoard's extra environment)."""
    if not installed():
        raise TensorBoardError(MISSING.format(python=sys.executable))
    annotations: Mapping[str, str] = (job.get("metadata") or {}).get("annotations") or {}
    if extension.ANNOTATION not in annotations:
        directory = str((workdir / LOG_DIR).resolve())
        return extension.with_local_log_dir(job, directory), directory, {}
    served = extension.served_log_dir(annotations)
    if served is None:
        raise TensorBoardError(
            f"metadata.annotations[{extension.ANNOTATION}]: --tensorboard serves s3:// and gs:// "
            "directories or, without the annotation, one in the run's folder; a pvc:// one is only "
            "readable on the cluster: remove the annotation for a local run"
        )
    return job, served[0], served[1]


class TensorBoardServer:
    """One TensorBoard process; its output goes to `log_path`."""

    def __init__(self, log_dir: str, env: Mapping[str, str], log_path: Path) -> None:
        self.log_dir = log_dir
        self.env = dict(env)
        self.log_path = log_path
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> str:
        """Start it and wait until it answers; its URL."""
        # A local directory must exist before TensorBoard lists it; a bucket is TensorBoard's to read.
        if "://" not in self.log_dir:
            Path(self.log_dir).mkdir(parents=True, exist_ok=True)
        (self.port,) = free_ports(1)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-c", WITHOUT_TENSORFLOW, f"--logdir={self.log_dir}"]
        argv += ["--host=127.0.0.1", f"--port={self.port}", "--reload_interval=2"]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                # Its own process group: the terminal's Ctrl-C goes to trainop run, which stops it last.
                start_new_session=True,
            )
        self._wait_ready()
        return self.url

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if not self.alive():
                raise TensorBoardError(f"TensorBoard exited at start; its output: {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}data/environment", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise TensorBoardError(f"TensorBoard did not answer within {READY_TIMEOUT:g}s; see {self.log_path}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
