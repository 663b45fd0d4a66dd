"""Following the containers' log files and printing their new lines with a `[worker-1]` prefix.

A line holding one of our JSON log records (`--log-format json`) is shown readably; the file keeps the
JSON as written.

Containers write straight into their files (no pipe through `trainop run`), so a slow terminal never
blocks training and the files are complete even if `trainop run` itself dies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# Lines longer than this are printed in pieces rather than held back until a newline arrives.
MAX_PENDING = 64 * 1024


def replica_name(job_name: str, pod_name: str) -> str:
    """`mnist-worker-1` -> `worker-1`: the job name is the same on every line, so it is left out."""
    prefix = f"{job_name}-"
    return pod_name[len(prefix) :] if pod_name.startswith(prefix) else pod_name


def prefix(job_name: str, pod_name: str, container: str, default_container: str) -> str:
    replica = replica_name(job_name, pod_name)
    return f"[{replica}]" if container == default_container else f"[{replica}/{container}]"


@dataclass
class LogFollower:
    path: Path
    prefix: str
    offset: int = 0
    pending: bytes = b""

    def read(self, final: bool = False) -> list[str]:
        """Complete lines written since the last call; `final` also returns an unterminated last line."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            data = b""
        self.offset += len(data)
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        if self.pending and (final or len(self.pending) > MAX_PENDING):
            lines.append(self.pending)
            self.pending = b""
        return [line.decode("utf-8", "replace").rstrip("\r") for line in lines]


@dataclass(frozen=True)
class Record:
    """A JSON log record as our sitecustomize writes it (docs/json-logs.md), reduced to what is shown."""

    time: str
    level: str
    logger: str
    message: str
    # The traceback of a structured exception, shown under the message.
    details: tuple[str, ...] = ()


def parse_record(line: str) -> Record | None:
    """The record a line holds, or None for any other line (shown as written)."""
    text = line.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("message"), str) or "level" not in obj:
        return None
    exc = obj.get("exception")
    traceback = exc.get("traceback") if isinstance(exc, dict) else None
    return Record(
        time=_clock(str(obj.get("time") or "")),
        level=str(obj.get("level")),
        logger=str(obj.get("logger") or ""),
        message=obj["message"],
        details=tuple(traceback.splitlines()) if isinstance(traceback, str) else (),
    )


def _clock(time: str) -> str:
    """`2026-12-01T13:45:12.345Z` -> `13:45:12.345`: a local run's lines are all from one day."""
    _, sep, clock = time.partition("T")
    return clock.rstrip("Z") if sep else time


def readable(prefix: str, record: Record) -> list[str]:
    """`13:45:12.345 INFO    [worker-1] train: epoch 1`, then the traceback indented below."""
    head = f"{record.time} {record.level:<7} {prefix} {record.logger}: {record.message}".lstrip()
    return [head, *(f"    {line}" for line in record.details)]
