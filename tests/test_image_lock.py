"""requirements.lock, what the project's image installs: every runtime dependency pinned at the version
the tests ran with, each pin with its wheels' hashes, and a Dockerfile that installs nothing else."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "hack" / "lock-image-requirements.py"
LOCK = REPO / "requirements.lock"


def lock_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock_image_requirements", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def locked() -> dict[str, list[str]]:
    """name==version -> its hashes, as pip reads the lock (a requirement, then its --hash options)."""
    out: dict[str, list[str]] = {}
    for entry in LOCK.read_text().replace("\\\n", " ").splitlines():
        if entry.strip() and not entry.startswith("#"):
            pin, *options = entry.split()
            out[pin] = [o.removeprefix("--hash=sha256:") for o in options]
    return out


def test_the_lock_pins_the_versions_installed_where_the_tests_ran() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_the_lock_covers_every_runtime_dependency_and_the_build_backend() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    direct = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    pins = {canonicalize_name(p.partition("==")[0]): p.partition("==")[2] for p in locked()}
    for requirement in map(Requirement, direct):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not in requirements.lock"
        assert requirement.specifier.contains(pins[name]), (requirement, pins[name])


def test_every_pin_is_exact_and_carries_at_least_one_wheel_hash() -> None:
    for pin, hashes in locked().items():
        assert re.fullmatch(r"[a-z0-9-]+==[0-9][0-9a-z.]*", pin), pin
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), (pin, hashes)


def test_a_stale_lock_fails_the_check_and_says_how_to_renew_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = lock_tool()
    wanted = tool.pins()
    name = next(iter(wanted))
    stale = tmp_path / "requirements.lock"
    stale.write_text(tool.render({**wanted, name: "0.0.1"}, {n: {"0" * 64} for n in wanted}))
    monkeypatch.setattr(tool, "LOCK", stale)
    monkeypatch.setattr(sys, "argv", ["lock-image-requirements.py", "--check"])
    assert tool.main() == 1
    assert "run python3 hack/lock-image-requirements.py" in capsys.readouterr().err


def test_the_image_installs_the_lock_with_hashes_and_the_project_without_resolving() -> None:
    steps = [line for line in (REPO / "Dockerfile").read_text().splitlines() if "pip install" in line]
    assert steps == [
        "RUN pip install --no-cache-dir --require-hashes --only-binary=:all: -r requirements.lock \\",
        "  && pip install --no-cache-dir --no-deps --no-build-isolation . \\",
    ]
    assert "!requirements.lock" in (REPO / ".dockerignore").read_text().splitlines()
