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
