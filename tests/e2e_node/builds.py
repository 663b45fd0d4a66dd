"""The build scripts the real-node tier needs, run from its fixtures (seconds when the cache is warm)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from controlplane import ControlPlaneError, default_bin_dir, tail
from trainop_stack import REPO, ensure_binaries

from tests.e2e_node.realnode import NODE_BINARIES

NODE_BUILD = REPO / "hack" / "build-node.sh"
IMAGES_BUILD = REPO / "hack" / "build-training-images.sh"


def run_build(script: Path, log_dir: Path) -> None:
    """Run a build script (idempotent, seconds when warm); raise with its log's tail if it fails."""
    log_path = log_dir / f"{script.stem}.log"
    with log_path.open("wb") as log:
        res = subprocess.run(["bash", str(script)], stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    if res.returncode != 0:
        raise ControlPlaneError(f"{script.name} exited {res.returncode}; log {log_path}:\n{tail(log_path)}")


def build_node_pieces(log_dir: Path) -> None:
    """The control plane's binaries (hack/build-control-plane.sh), then the node's (hack/build-node.sh)."""
    ensure_binaries(default_bin_dir(), log_dir / "build-control-plane.log")
    run_build(NODE_BUILD, log_dir)
    missing = [b for b in NODE_BINARIES if not os.access(default_bin_dir() / b, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{missing} missing from {default_bin_dir()} after hack/build-node.sh")


def build_training_images(log_dir: Path) -> None:
    """The examples' images and the project's, in the layout the tier's registry serves."""
    run_build(IMAGES_BUILD, log_dir)
