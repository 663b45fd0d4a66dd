"""Runs for the browser tests: real `trainop run`s of small jobs whose replicas do what the test says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.local.helpers import behave, eventually
from tests.local.runs import replica, start, trainop, write_job
from trainop.jsontypes import Json


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def job_file(
    folder: Path, name: str, worker: list[str], workers: int = 2, master: list[str] | None = None
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_job(
        folder,
        "PyTorchJob",
        name,
        Master=replica("PyTorchJob", master or behave("--print", f"{name} master says hello")),
        Worker=replica("PyTorchJob", worker, replicas=workers),
    )


def finished_run(
    runs: Path, name: str, worker: list[str], workers: int = 2, master: list[str] | None = None
) -> Path:
    workdir = runs / name
    manifest = job_file(runs.parent / "jobs" / name, name, worker, workers, master)
    done = trainop(str(manifest), "--workdir", str(workdir))
    assert done.returncode in (0, 1), done.stderr
    return workdir


def live_run(runs: Path, name: str, worker: list[str]) -> tuple[subprocess.Popen[str], Path]:
    workdir = runs / name
    # The master waits as the workers do: a PyTorchJob succeeds as soon as its master does.
    proc = start(
        str(job_file(runs.parent / "jobs" / name, name, worker, master=worker)), "--workdir", str(workdir)
    )
    assert eventually(lambda: state(workdir) == "Running"), "the run never got to Running"
    return proc, workdir


def record(workdir: Path) -> Json:
    try:
        data: Json = json.loads((workdir / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return data


def state(workdir: Path) -> str:
    conditions = (record(workdir).get("job") or {}).get("status", {}).get("conditions") or []
    true = [c["type"] for c in conditions if c.get("status") == "True"]
    return true[-1] if true else ""
