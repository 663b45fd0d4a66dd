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
from dataclasses import dataclass, field
from typing import Any

from tests.local.runs import start

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
