"""The `helm` fixture for the chart tests of this directory: asking for it puts a test in the e2e tier."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "trainop"


def helm_binary() -> str | None:
    for candidate in (
        os.environ.get("TRAINOP_HELM"),
        str(Path(os.environ.get("TRAINOP_E2E_CACHE", Path.home() / ".cache/trainop-e2e")) / "bin/helm"),
        shutil.which("helm"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """helm, and a copy of the chart without its dependency.

    helm install/template refuse a chart whose dependency is missing from charts/ even when its condition
    is false, and the dependency lives in an OCI registry this machine cannot reach.
    """
    binary = helm_binary()
    if binary is None:
        pytest.fail("helm not found: run hack/build-control-plane.sh (it builds helm) or set TRAINOP_HELM")
    copy = tmp_path_factory.mktemp("chart") / "trainop"
    shutil.copytree(CHART, copy)
    chart = yaml.safe_load((copy / "Chart.yaml").read_text())
    del chart["dependencies"]
    (copy / "Chart.yaml").write_text(yaml.safe_dump(chart))
    return binary, copy
