"""Jobs with a status, and run folders as `trainop run` leaves them, for the UI's hermetic tests."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from tests.builders import job
from trainop.jsontypes import Json


def with_status(
    obj: Json, *conditions: tuple[str, str], created: str = "2026-12-01T10:00:00Z", **status: Any
) -> Json:
    """`conditions` are (type, reason) pairs, all True, in the order they happened, a minute apart."""
    out = copy.deepcopy(obj)
    out["metadata"]["creationTimestamp"] = created
    out["status"] = {
        "conditions": [
            {"type": t, "status": "True", "reason": r, "message": f"{t} because {r}",
             "lastTransitionTime": f"2026-12-01T10:{i:02d}:00Z"}
            for i, (t, r) in enumerate(conditions)
        ],
        **status,
    }  # fmt: skip
    return out


def pod(name: str, phase: str = "Running", restarts: int = 0, exit_code: int | None = None) -> Json:
    state: Json = {"running": {"startedAt": "2026-12-01T10:00:00Z"}}
    if exit_code is not None:
        state = {
            "terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": "2026-12-01T10:05:00Z"}
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"training.kubeflow.org/replica-type": "worker"}},
        "spec": {},
        "status": {
            "phase": phase,
            "startTime": "2026-12-01T10:00:00Z",
            "containerStatuses": [{"name": "pytorch", "restartCount": restarts, "state": state}],
        },
    }


def write_run(
    root: Path,
    folder: str,
    obj: Json,
    pods: list[Json] | None = None,
    logs: dict[str, str] | None = None,
    merged: str = "",
    live: bool = False,
) -> Path:
    """A run folder; `live` gives it this test process as its `trainop run`, which is alive."""
    workdir = root / folder
    workdir.mkdir(parents=True)
    record = {
        "job": obj,
        "pods": pods or [],
        "events": [{"time": "2026-12-01T10:00:00Z", "message": "worker-0 created"}],
        "logs": {},
        "finished": None if live else {"code": 0, "reason": "done"},
        "pid": os.getpid(),
    }
    for name, text in (logs or {}).items():
        pod_name, container = name.split("/")
        (workdir / "logs" / pod_name).mkdir(parents=True, exist_ok=True)
        (workdir / "logs" / pod_name / f"{container}.log").write_text(text)
        record["logs"].setdefault(pod_name, {})[container] = f"logs/{pod_name}/{container}.log"
    (workdir / "run.json").write_text(json.dumps(record))
    if merged:
        (workdir / "merged.log").write_text(merged)
    return workdir


def pytorch(name: str, namespace: str = "default") -> Json:
    return job("PyTorchJob", name, namespace, Master=1, Worker=2)


def record_tensorboard(workdir: Path, board: object) -> None:
    """What `trainop run --tensorboard` adds to its run.json: {"url": "http://127.0.0.1:PORT/"}."""
    record = json.loads((workdir / "run.json").read_text())
    record["tensorboard"] = board
    (workdir / "run.json").write_text(json.dumps(record))
