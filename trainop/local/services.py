"""The servers extensions run beside a `trainop run` (trainop.extensions.faces.LocalServer), each one
process on a free 127.0.0.1 port over one directory: `trainop run --tensorboard`'s TensorBoard.

Each is this machine's process, outside the replicas' loopback-only namespace, so a browser here reaches
it; what it serves and how it is started are its extension's (`Extension.local_setup`).
"""

from __future__ import annotations

import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from trainop.extensions.faces import LocalServer
from trainop.local.ports import free_ports


class ServerError(Exception):
    """A server did not start; the message says why and where its output is."""


class ServerProcess:
    """One server's process; its output goes to `log_path` in the run's folder."""

    def __init__(self, server: LocalServer, workdir: Path) -> None:
        self.server = server
        self.log_path = workdir / (server.log_file or f"{server.record_key}.log")
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> str:
        """Start it and wait until it answers; its URL."""
        # A local directory must exist before it is listed; a bucket is the server's to read.
        if "://" not in self.server.directory:
            Path(self.server.directory).mkdir(parents=True, exist_ok=True)
        (self.port,) = free_ports(1)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [arg.replace("{port}", str(self.port)) for arg in self.server.argv]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.server.env},
                # Its own process group: the terminal's Ctrl-C goes to trainop run, which stops it last.
                start_new_session=True,
            )
        self._wait_ready()
        return self.url

    def _wait_ready(self) -> None:
        name, timeout = self.server.name, self.server.ready_timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise ServerError(f"{name} exited at start; its output: {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}{self.server.ready_path}", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise ServerError(f"{name} did not answer within {timeout:g}s; see {self.log_path}")

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
