"""pytest fixtures for the e2e suite: one real control plane + trainop stack per session.

* ``stack`` (session): builds or reuses the binaries (``pytest.fail``, never skip, when one is missing and
  cannot be built), then ``TrainopStack.start()`` (see trainop_stack.py). Work dir and component logs
  live under pytest's basetemp (kept for the last runs); failed tests get the logs' tails in their report.
* ``namespace`` (function): a fresh ``e2e-<random>`` namespace with its default ServiceAccount, deleted
  afterwards without waiting. ``module_namespace`` is the same per test module.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlaneError, default_bin_dir
from trainop_stack import Namespace, TrainopStack, ensure_binaries

_STACK: TrainopStack | None = None


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainopStack]:
    global _STACK
    work = tmp_path_factory.mktemp("e2e")
    bin_dir = default_bin_dir()
    try:
        ensure_binaries(bin_dir, work / "build-control-plane.log")
    except ControlPlaneError as e:
        pytest.fail(f"e2e binaries unavailable: {e}", pytrace=False)
    s = TrainopStack(work / "stack", bin_dir)
    try:
        s.start()
    except ControlPlaneError as e:
        # Free ports are picked before the processes bind them; another program may win that race.
        if "address already in use" not in str(e):
            pytest.fail(f"the e2e stack did not start: {e}", pytrace=False)
        s = TrainopStack(work / "stack-retry", bin_dir)
        try:
            s.start()
        except ControlPlaneError as e2:
            pytest.fail(f"the e2e stack did not start (twice): {e2}\nfirst attempt: {e}", pytrace=False)
    _STACK = s
    try:
        yield s
    finally:
        _STACK = None
        s.stop()
        leftovers = s.cp.leftover_processes()
        if leftovers:  # pragma: no cover - teardown bug
            raise AssertionError(f"processes survived teardown: {leftovers}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed and _STACK is not None:
        report.sections.append(("e2e component logs (tails)", _STACK.log_tails()))
    return report


def _new_namespace(stack: TrainopStack) -> Namespace:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    stack.cp.create_namespace(name)
    return Namespace(stack, name)


def _drop_namespace(ns: Namespace) -> None:
    if os.environ.get("TRAINOP_E2E_KEEP_NAMESPACES"):
        return
    ns.stack.kubectl("delete", "namespace", ns.name, "--wait=false", check=False)


@pytest.fixture
def namespace(stack: TrainopStack) -> Iterator[Namespace]:
    ns = _new_namespace(stack)
    yield ns
    _drop_namespace(ns)


@pytest.fixture(scope="module")
def module_namespace(stack: TrainopStack) -> Iterator[Namespace]:
    ns = _new_namespace(stack)
    yield ns
    _drop_namespace(ns)


@pytest.fixture(scope="session")
def kubeconfig(stack: TrainopStack) -> Path:
    return stack.kubeconfig
