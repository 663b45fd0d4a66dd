"""What `trainop run` leaves in the run's folder for later readers (the web UI): `run.json` and `merged.log`.

`run.json` holds the job as the last sync left it, its pods as the hook observed them, the run's events,
where each container's log is and, with `--tensorboard`, `"tensorboard": {"url": ...}`; it is rewritten
(atomically) at most every `every` seconds while the run goes and once at the end, so a run stays
browsable after it finished or died. `merged.log` is the log lines of
every container in the order `trainop run` printed them, each with its `[worker-1]` prefix.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from trainop.api.times import timestamp
from trainop.jsontypes import Json
from trainop.local.display import Display, Row
from trainop.local.kubelet import LocalPod

RUN_FILE = "run.json"
MERGED_LOG = "merged.log"
# A long run's events are kept to the last ones: the file is rewritten on every update.
MAX_EVENTS = 1000


class RunRecorder:
    """A Display that passes everything on to `inner` and keeps the run's folder up to date."""

    def __init__(self, inner: Display, workdir: Path, every: float = 0.5) -> None:
        self.inner = inner
        self.workdir = workdir
        self.every = every
        self.job: Callable[[], Json] | None = None
        self.live_pods: Callable[[], list[LocalPod]] = list
        # Every pod the run had, as last seen: a deleted pod is gone from the run but not from its story.
        self.pods: dict[str, Json] = {}
        self.logs: dict[str, dict[str, str]] = {}
        self.events: list[Json] = []
        self.lines: list[str] = []
        self.written = 0.0
        self.finished: Json | None = None
        # {"url": ...} of each server an extension runs beside the job, by its record key (the TensorBoard
        # of `trainop run --tensorboard` under "tensorboard"), for a reader to link to.
        self.servers: dict[str, Json] = {}

    def attach(self, job: Callable[[], Json], pods: Callable[[], list[LocalPod]]) -> None:
        """Where the job as the last sync left it, and the run's current pods, are read from."""
        self.job, self.live_pods = job, pods

    def log(self, prefix: str, line: str) -> None:
        self.inner.log(prefix, line)
        self.lines.append(f"{prefix} {line}\n")

    def event(self, text: str) -> None:
        self.inner.event(text)
        # An event is news about the pods; the last one ("stopping") comes just before they are deleted.
        self._snapshot()
        self.events.append({"time": timestamp(datetime.now(UTC)), "message": text})
        del self.events[:-MAX_EVENTS]

    def status(self, rows: list[Row], title: str) -> None:
        self.inner.status(rows, title)

    def flush(self) -> None:
        self.inner.flush()
        self._append_lines()
        # Every flush, so a pod's last state before it is gone is kept, even between two writes.
        self._snapshot()
        if time.monotonic() - self.written >= self.every:
            self.write()

    def _snapshot(self) -> None:
        for pod in self.live_pods():
            self.pods[pod.name] = pod.observed()
            self.logs[pod.name] = {c.name: _relative(c.log_path, self.workdir) for c in pod.containers()}

    def close(self) -> None:
        self.inner.close()
        self._append_lines()
        self.write()

    def finish(self, code: int, reason: str, job: Json) -> None:
        """The run is over: record how it ended."""
        self.finished = {"code": code, "reason": reason, "time": timestamp(datetime.now(UTC))}
        self.job = lambda: job
        self.write()

    def _append_lines(self) -> None:
        if not self.lines:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        with (self.workdir / MERGED_LOG).open("a", encoding="utf-8") as f:
            f.writelines(self.lines)
        self.lines.clear()

    def write(self) -> None:
        if self.job is None:
            return
        self.written = time.monotonic()
        self._snapshot()
        record = {
            "job": self.job(),
            "pods": list(self.pods.values()),
            "events": self.events,
            "logs": self.logs,
            "finished": self.finished,
            # So a reader can tell a live run from one whose `trainop run` died, and stop a live one.
            "pid": os.getpid(),
            "updated": timestamp(datetime.now(UTC)),
        }
        for key, server in self.servers.items():
            record.setdefault(key, server)
        self.workdir.mkdir(parents=True, exist_ok=True)
        tmp = self.workdir / f".{RUN_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(self.workdir / RUN_FILE)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
