"""pytest fixtures of the real-node tier: one control plane + real node + trainop stack per session.

* ``node_stack`` (session): builds or reuses the binaries and node images (hack/build-control-plane.sh,
  hack/build-node.sh; ``pytest.fail``, never skip, when something cannot be built), then
  ``RealNodeStack.start()`` (see realnode.py). Teardown checks that nothing is left: no process,
  bridge, iptables chain, mount or shim.
* ``training_images`` (session): the examples' images, hack/build-training-images.sh.
* ``ns`` (function): a fresh ``node-<random>`` namespace, deleted afterwards without waiting.

test_chart_in_cluster.py, test_networkpolicy.py and test_release.py start a node of their own (the chart
or the release installed in-cluster, nothing on the host); there is one node per machine, so their tests
are ordered before every other test of this tier.

Every test here is in the ``node`` tier (tests/conftest.py marks it); failed tests get the component
logs' tails in their report.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlaneError
from trainop_stack import Namespace

from tests.e2e_node.builds import build_training_images, prepare, running
from tests.e2e_node.realnode import RealNodeStack

_STACK: RealNodeStack | None = None
# Modules that start a node of their own: they run before the session node of the other modules starts.
OWN_NODE_MODULES = ("test_chart_in_cluster.py", "test_networkpolicy.py", "test_release.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    mine = [i for i, item in enumerate(items) if here in Path(str(item.fspath)).resolve().parents]
    # One node per machine: a module with its own node must finish before node_stack starts.
    ordered = sorted(
        (items[i] for i in mine), key=lambda item: Path(str(item.fspath)).name not in OWN_NODE_MODULES
    )
    for i, item in zip(mine, ordered, strict=True):
        items[i] = item


@pytest.fixture(scope="session")
def node_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNodeStack]:
    global _STACK
    work = tmp_path_factory.mktemp("e2e_node")
    prepare(work)
    stack = RealNodeStack(work / "stack")
    with running(stack, stack.node):
        _STACK = stack
        try:
            yield stack
        finally:
            _STACK = None


@pytest.fixture(scope="session")
def training_images(node_stack: RealNodeStack) -> None:
    """The examples' images (and the project's) in the registry's layout: hack/build-training-images.sh.

    Built after the node is up: the registry serves images added while it runs.
    """
    try:
        build_training_images(node_stack.work_dir)
    except ControlPlaneError as e:
        pytest.fail(f"training images unavailable: {e}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and _STACK is not None:
        report.sections.append(("real-node component logs (tails)", _STACK.log_tails()))
    return report


@pytest.fixture
def ns(node_stack: RealNodeStack) -> Iterator[Namespace]:
    name = f"node-{uuid.uuid4().hex[:8]}"
    node_stack.cp.create_namespace(name)
    namespace = Namespace(node_stack, name)
    yield namespace
    if not os.environ.get("TRAINOP_E2E_KEEP_NAMESPACES"):
        node_stack.kubectl("delete", "namespace", name, "--wait=false", check=False)
