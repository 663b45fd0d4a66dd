"""The TensorBoard image (tensorboard-image): TensorBoard and boto3 without TensorFlow, every package
pinned at the version the tests ran with and installed by wheel hash, under the tag the chart and the
hook name by default."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from trainop.extensions.tensorboard import DEFAULT_IMAGE

REPO = Path(__file__).resolve().parents[1]
IMAGE = REPO / "tensorboard-image"


def test_the_lock_pins_the_versions_installed_where_the_tests_ran() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "hack" / "lock-image-requirements.py"),
            "--image",
            "tensorboard",
            "--check",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_image_has_tensorboard_and_boto3_but_no_tensorflow() -> None:
    locked = {
        line.split("==")[0] for line in (IMAGE / "requirements.lock").read_text().splitlines() if "==" in line
    }
    assert {"tensorboard", "tensorboard-data-server", "boto3"} <= locked
    assert not {name for name in locked if name.startswith("tensorflow")}


def test_the_image_installs_only_the_lock_by_hash_and_runs_tensorboard() -> None:
    dockerfile = (IMAGE / "Dockerfile").read_text()
    assert [line for line in dockerfile.splitlines() if "pip install" in line] == [
        "RUN pip install --no-cache-dir --require-hashes --only-binary=:all: -r /tmp/requirements.lock \\"
    ]
    assert 'ENTRYPOINT ["tensorboard"]' in dockerfile
    assert "USER 65532" in dockerfile


def test_the_chart_and_the_hook_default_to_the_image_of_this_version() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    values = yaml.safe_load((REPO / "charts" / "trainop" / "values.yaml").read_text())
    assert values["tensorboard"]["image"] == DEFAULT_IMAGE == f"trainop-tensorboard:{version}"
