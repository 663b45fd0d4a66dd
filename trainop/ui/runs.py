"""The runs of `trainop run` under one folder as a Source: each run's `run.json`, `merged.log` and log files.

A run is live while its `trainop run` process (the pid in run.json) is alive and has not recorded how it
ended; a folder with only the `job.json` of an older `trainop run` is shown as finished, with its logs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Generator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import yaml

from trainop.admission.admit import admit
from trainop.extensions import EXTENSIONS
from trainop.frameworks import KINDS
from trainop.jsontypes import Json
from trainop.local.record import MERGED_LOG, RUN_FILE
from trainop.ui.source import Container, Detail, EventRow, Invalid, NotAllowed, User
from trainop.ui.summary import Summary, summarize

# Read at most this much of a log's end for its first lines: a long run's log can be gigabytes.
TAIL_BYTES = 512 * 1024
POLL_SECONDS = 0.3


class Runs:
    actions: tuple[str, ...] = ("stop", "delete")
    creates = "started"
    # An annotation alone makes no TensorBoard here: a run links the one `trainop run --tensorboard`
    # started and recorded (Summary.served).
    serves_addons = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self._cache: dict[Path, tuple[tuple[int, int], Json, Summary]] = {}
        # Runs the wizard started: reaped as they end, so none is left a zombie.
        self._started: list[subprocess.Popen[bytes]] = []

    # ---- reading ------------------------------------------------------------------------------------
    def _folders(self) -> list[Path]:
        try:
            return sorted(
                p
                for p in self.root.iterdir()
                if not p.name.startswith(".") and self._inside(p, as_folder=True)
            )
        except FileNotFoundError:
            return []

    def _inside(self, path: Path, as_folder: bool = False) -> bool:
        """Whether `path`, symlinks resolved, is a file (or with `as_folder`, a folder) under the runs folder:
        what the UI reads and serves, so a link planted in the folder cannot lead it elsewhere."""
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return False
        kind_ok = resolved.is_dir() if as_folder else resolved.is_file()
        return kind_ok and resolved.is_relative_to(self.root.resolve())

    def _entry(self, folder: Path) -> tuple[Json, Summary] | None:
        """The run's record and its list row, re-read only when its file changed."""
        path = folder / RUN_FILE
        if not self._inside(path):
            path = folder / "job.json"
            if not self._inside(path):
                return None
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._cache.get(folder)
        if cached and cached[0] == stamp:
            return cached[1], cached[2]
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        record = data if path.name == RUN_FILE else {"job": data, "pods": [], "events": [], "finished": {}}
        if not isinstance(record.get("job"), dict):
            return None
        summary = _summary(folder.name, record)
        self._cache[folder] = (stamp, record, summary)
        return record, summary

    def _record(self, folder: Path) -> Json | None:
        entry = self._entry(folder)
        return entry[0] if entry else None

    def _folder(self, key: str) -> Path | None:
        folder = self.root / key
        if "/" in key or key.startswith(".") or not self._inside(folder, as_folder=True):
            return None
        return folder

    def summaries(self, user: User) -> list[Summary]:
        self._started = [proc for proc in self._started if proc.poll() is None]
        entries = (self._entry(folder) for folder in self._folders())
        return [entry[1] for entry in entries if entry is not None]

    def detail(self, user: User, key: str) -> Detail | None:
        folder = self._folder(key)
        record = self._record(folder) if folder else None
        if folder is None or record is None:
            return None
        job = record["job"]
        pods = [p for p in record.get("pods") or [] if isinstance(p, dict)]
        events = [
            EventRow(str(e.get("time") or ""), "Normal", "", str(e.get("message") or ""))
            for e in record.get("events") or []
            if isinstance(e, dict)
        ]
        notes = []
        live = _live(record)
        if not record.get("finished") and not live:
            notes.append("its trainop run ended without recording how the job ended (killed or crashed)")
        return Detail(_summary(key, record), job, pods, events, _containers(folder, record), live, notes)

    def details(self, user: User, key: str, poll: float) -> Generator[Detail | None]:
        # A run's record is a file on this machine: each stream reads it itself.
        while True:
            detail = self.detail(user, key)
            yield detail
            if detail is None:
                return
            time.sleep(poll)

    def read_logs(
        self, user: User, key: str, detail: Detail, container: Container | None, tail: int
    ) -> list[str]:
        folder = self._folder(key)
        record = self._record(folder) if folder else None
        path = self._log_path(folder, record, container) if folder and record else None
        return _tail(path, tail)[1] if path else []

    def follow_logs(
        self, user: User, key: str, detail: Detail, container: Container | None, tail: int
    ) -> Generator[list[str]]:
        folder = self._folder(key)
        record = self._record(folder) if folder else None
        if folder is None or record is None:
            return
        path = self._log_path(folder, record, container)
        if path is None:
            return
        offset, lines = _tail(path, tail)
        yield lines
        pending = b""
        while True:
            record = self._record(folder) or record
            live = _live(record)
            data = _read_from(path, offset)
            offset += len(data)
            pending += data
            *complete, pending = pending.split(b"\n")
            if complete:
                yield [line.decode("utf-8", "replace") for line in complete]
            elif not live:
                if pending:
                    yield [pending.decode("utf-8", "replace")]
                return
            else:
                yield []
            time.sleep(POLL_SECONDS)

    def _log_path(self, folder: Path, record: Json, container: Container | None) -> Path | None:
        if container is None:
            return self._log_file(folder, folder / MERGED_LOG, record)
        for known in _containers(folder, record):
            if known == container:
                rel = ((record.get("logs") or {}).get(container.pod) or {}).get(container.name)
                path = folder / str(rel) if rel else folder / "logs" / container.pod / f"{container.name}.log"
                return self._log_file(folder, path, record)
        return None

    def _log_file(self, folder: Path, path: Path, record: Json) -> Path | None:
        """`path` resolved, if it is a file in the run's folder; while the run lasts, also a log not yet
        written (read once it is, and opened without following a link: `_tail`, `_read_from`)."""
        if self._inside(path):
            resolved = path.resolve()
            return resolved if resolved.is_relative_to(folder.resolve()) else None
        if _live(record) and not path.is_symlink() and path.parent.resolve().is_relative_to(folder.resolve()):
            return path.parent.resolve() / path.name
        return None

    # ---- doing --------------------------------------------------------------------------------------
    def may(self, user: User, key: str, action: str) -> bool:
        return True  # the runs folder is this machine user's own

    def act(self, user: User, key: str, action: str) -> str:
        folder = self._folder(key)
        record = self._record(folder) if folder else None
        if folder is None or record is None:
            raise Invalid([("", f"no run {key!r} under {self.root}")])
        if action == "stop":
            pid = record.get("pid")
            if not _live(record) or not isinstance(pid, int):
                raise Invalid([("", "the run has already ended")])
            # What Ctrl-C does: trainop run stops every pod (TERM, grace period, KILL) and records the end.
            os.kill(pid, signal.SIGTERM)
            return f"stopping {key}: its pods get SIGTERM, then SIGKILL after the grace period"
        if action == "delete":
            if _live(record):
                raise Invalid([("", "the run is still going: stop it first")])
            shutil.rmtree(folder)
            self._cache.pop(folder, None)
            return f"deleted the run folder {folder}"
        raise NotAllowed(f"{action} is not something a local run can do")

    def create(self, user: User, job: Json, dry_run: bool, companions: Sequence[Json] = ()) -> str:
        errors = check(job)
        if errors:
            raise Invalid(errors)
        if dry_run:
            return "valid"
        name = str(job["metadata"]["name"])
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        spool = self.root / ".wizard"
        spool.mkdir(parents=True, exist_ok=True)
        manifest = spool / f"{name}-{stamp}.yaml"
        # The ConfigMaps first, as in a file for `kubectl apply`: `trainop run` reads them from the same file.
        manifest.write_text(yaml.safe_dump_all([*companions, job], sort_keys=False))
        workdir = self.root / f"{name}-{stamp}"
        n = 1
        while workdir.exists():
            n += 1
            workdir = self.root / f"{name}-{stamp}-{n}"
        with (spool / f"{workdir.name}.out").open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "trainop.cli", "run", str(manifest), "--workdir", str(workdir)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._started.append(proc)
        # Browsable at once: the run's own record replaces this one as soon as it has started.
        workdir.mkdir()
        first: Json = {
            "job": admit(job).job,
            "pods": [],
            "events": [],
            "logs": {},
            "finished": None,
            "pid": proc.pid,
        }
        (workdir / RUN_FILE).write_text(json.dumps(first) + "\n")
        return workdir.name


def check(job: Json) -> list[tuple[str, str]]:
    """What the validating webhook would refuse, as (field path, message) pairs."""
    kind = job.get("kind")
    if kind not in KINDS:
        return [("kind", f"must be one of {', '.join(sorted(KINDS))}")]
    result = admit(job).checks
    return [(e.path, e.detail) for e in result.errors]


def _summary(key: str, record: Json) -> Summary:
    pods = [p for p in record.get("pods") or [] if isinstance(p, dict)]
    return replace(summarize(record["job"], key, pods), served=_served(record))


def _served(record: Json) -> tuple[tuple[str, str], ...]:
    """The servers `trainop run` started beside the job that an extension links to (its TensorBoard), as
    it recorded them, by key; only an http(s) address is a link (the record is a file anyone who can
    write the runs folder may edit)."""
    out = []
    for key in dict.fromkeys(link.key for ext in EXTENSIONS for link in ext.links):
        server = record.get(key)
        url = server.get("url") if isinstance(server, dict) else None
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            out.append((key, url))
    return tuple(out)


def _live(record: Json) -> bool:
    if record.get("finished"):
        return False
    pid = record.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _containers(folder: Path, record: Json) -> list[Container]:
    logs = record.get("logs")
    if isinstance(logs, dict) and logs:
        return [Container(pod, name) for pod in sorted(logs) for name in sorted(logs[pod] or {})]
    found = []
    for pod_dir in sorted((folder / "logs").glob("*")):
        found += [Container(pod_dir.name, f.stem) for f in sorted(pod_dir.glob("*.log"))]
    return found


def _tail(path: Path, lines: int) -> tuple[int, list[str]]:
    """The offset of the end of the last complete line, and up to `lines` complete lines before it."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(size - TAIL_BYTES, 0)
            f.seek(start)
            data = f.read(size - start)
    except OSError:
        return 0, []
    end = data.rfind(b"\n") + 1
    body = data[:end].split(b"\n")[:-1]
    if start > 0 and body:
        body = body[1:]  # the first one is cut
    return start + end, [line.decode("utf-8", "replace") for line in body[-lines:]]


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
            f.seek(offset)
            return f.read(TAIL_BYTES)
    except OSError:
        return b""
