"""What the real-node fixtures share: the build scripts (seconds when the cache is warm), and bringing a
node up and down with the checks every run needs (root; ``pytest.fail``, never skip; nothing left behind)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest
from controlplane import ControlPlaneError, default_bin_dir, tail
from trainop_stack import REPO, ensure_binaries

from tests.e2e_node.realnode import NODE_BINARIES, NodeControlPlane

NODE_BUILD = REPO / "hack" / "build-node.sh"
IMAGES_BUILD = REPO / "hack" / "build-training-images.sh"
KUBE_ROUTER_BUILD = REPO / "hack" / "build-kube-router.sh"


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


def build_kube_router(log_dir: Path) -> Path:
    """The NetworkPolicy enforcer (hack/build-kube-router.sh): only test_networkpolicy.py runs it."""
    run_build(KUBE_ROUTER_BUILD, log_dir)
    binary = default_bin_dir() / "kube-router"
    if not os.access(binary, os.X_OK):
        raise ControlPlaneError(f"{binary} missing after hack/build-kube-router.sh")
    return binary


def prepare(work: Path, *, training_images: bool = False) -> None:
    """Fail the test run unless this is root and every piece a node needs is built."""
    if os.geteuid() != 0:
        pytest.fail("the real-node tier runs containerd and a kubelet: it needs root", pytrace=False)
    try:
        build_node_pieces(work)
        if training_images:
            build_training_images(work)
    except ControlPlaneError as e:
        pytest.fail(f"real-node binaries or images unavailable: {e}", pytrace=False)


class Startable(Protocol):
    def start(self) -> object: ...
    def stop(self) -> None: ...


@contextlib.contextmanager
def running(thing: Startable, node: NodeControlPlane) -> Iterator[None]:
    """``thing`` (the node, or a stack on it) started for the block, then stopped; the run fails if the
    node's teardown left anything on the machine."""
    try:
        thing.start()
    except ControlPlaneError as e:
        pytest.fail(f"the real node did not start: {e}", pytrace=False)
    try:
        yield
    finally:
        thing.stop()
        leftovers = node.leftovers()
        if leftovers:  # pragma: no cover - teardown bug
            raise AssertionError(f"real-node teardown left: {leftovers}")
