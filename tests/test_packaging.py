"""The wheel, built offline from the work tree, installs exactly the packages `trainop`, `hooks` and
`webhooks`, every module of them, and the package data.

pip does not notice two distributions writing the same top-level package, so one named like a generic
package of ours would overwrite it silently (or be overwritten): the set of top-level names is pinned.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"trainop", "hooks", "webhooks"}
# What a fresh clone does not have: a stale build/lib would put deleted modules back into the wheel.
NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
    ".hypothesis", ".venv", "trainop-runs",
)  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=NOT_IN_A_CLONE, symlinks=True)
    out = work / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [built] = out.glob("trainop-*.whl")
    return zipfile.ZipFile(built)


def dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    [path] = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}") and n.count("/") == 1]
    return wheel.read(path).decode()


def test_the_wheel_installs_exactly_our_three_packages(wheel: zipfile.ZipFile) -> None:
    files = [n for n in wheel.namelist() if not n.split("/")[0].endswith((".dist-info", ".data"))]
    assert {n.split("/")[0] for n in files} == PACKAGES
    assert all("/" in n for n in files), "a top-level module besides the packages"
    # What pip records as the distribution's top-level names, and the one command it installs.
    assert set(dist_info(wheel, "top_level.txt").split()) == PACKAGES
    assert "trainop = trainop.cli:main" in dist_info(wheel, "entry_points.txt")


def test_every_module_and_the_package_data_are_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    # A directory without __init__.py is no package to setuptools' find: its modules would be left out.
    sources = {str(f.relative_to(REPO)) for p in PACKAGES for f in (REPO / p).rglob("*.py")}
    assert sources - names == set()
    assert "trainop/install/schemas/pod_template_spec.json" in names


def test_the_examples_are_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    shipped = {
        str(f.relative_to(REPO))
        for f in (REPO / "trainop" / "examples").rglob("*")
        if f.is_file() and "__pycache__" not in f.parts
    }
    assert {"trainop/examples/pytorch/job.yaml", "trainop/examples/pytorch/train.py"} <= shipped
    assert shipped - set(wheel.namelist()) == set()


def test_the_installed_package_lists_shows_and_runs_its_examples_with_no_clone(
    wheel: zipfile.ZipFile, tmp_path: Path
) -> None:
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    wheel.extractall(site)
    elsewhere.mkdir()
    # The interpreter's own `python3` first on PATH, as for a job's command; only the wheel's trainop.
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }

    def trainop(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trainop.cli", *args],
            cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    where = subprocess.run(
        [sys.executable, "-c", "import trainop.examples as e; print(e.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(site)
    listed = trainop("examples")
    assert listed.returncode == 0 and "pytorch  " in listed.stdout, listed.stderr
    shown = trainop("examples", "show", "tensorflow")
    assert shown.returncode == 0 and "kind: ConfigMap" in shown.stdout, shown.stderr
    ran = trainop("run", "example:tensorflow", "--workdir", str(tmp_path / "run"), "--timeout", "90")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert "job Succeeded" in ran.stdout
