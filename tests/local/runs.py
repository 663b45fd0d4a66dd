"""Running `trainop run` the way a user does, through the real CLI in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests import builders
from trainop.frameworks import kind_info
from trainop.jsontypes import Json

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainop.cli", "run", *args]


def env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # `python3` in a job's command must be the interpreter these tests run with (a venv, pyenv, ...).
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, **(extra or {})}


def trainop(
    *args: str, timeout: float = 120, extra_env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(*args), cwd=REPO, env=env(extra_env), capture_output=True, text=True, timeout=timeout
    )


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli(*args), cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def replica(
    kind: str, command: list[str], replicas: int = 1, policy: str = "Never", **container: Any
) -> Json:
    spec = builders.container(kind_info(kind).default_container, "python:3.11", command=command, **container)
    return {"replicas": replicas, "restartPolicy": policy, "template": {"spec": {"containers": [spec]}}}


def write_job(
    folder: Path, kind: str, name: str = "t", run_policy: Json | None = None, **replicas: Json
) -> Path:
    job = builders.document(kind, {"name": name}, replicas)
    if run_policy:
        job["spec"]["runPolicy"] = run_policy
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def pod_name_env() -> list[Json]:
    return [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
