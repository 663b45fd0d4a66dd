"""Test tiers and the hypothesis profiles every run uses.

Tiers. A test is in a slow tier when it lives under that tier's path or asks for a fixture that only
that tier's build provides; every other test is hermetic (no cluster binary, no root, no image):

=============  ==============================================  ============================================
marker         path or fixture                                 needs
=============  ==============================================  ============================================
e2e            tests/e2e/, the ``helm`` and ``kubectl``         kube-apiserver, etcd, kwok, Metacontroller,
               fixtures of tests/install                       helm, kubectl (hack/build-control-plane.sh)
differential   tests/differential/test_differential.py         the e2e binaries and Kubeflow's operator
                                                               (hack/build-kubeflow.sh)
node           tests/e2e_node/                                 root, kubelet, containerd (hack/build-node.sh)
image          tests/image/                                    podman and the image (hack/build-image.sh)
browser        tests/ui_browser/                               Debian's chromium and playwright
                                                               (hack/install-browser.sh)
=============  ==============================================  ============================================

Fast. Of the hermetic tests, those that start no process and take no seconds also get the ``fast``
marker (``make fast``, ``-m fast``): the pure core, the HTTP edges through flask's test client,
admission, the extensions, the UI without a browser and the small fuzz. Left out are the files of
``NOT_FAST_PATHS`` (measured with ``--durations=0``: they start gunicorn, scripts, local runs or real
training processes, or render the chart), the tests of ``NOT_FAST_TESTS`` (seconds of CPU each) and,
wherever it lives, any test that reaches a helper of ``PROCESS_HELPERS`` (``trainop run`` in a
subprocess, gunicorn, any subprocess) from its own code, a function of its module or one of its
fixtures, so a new local training is out of the fast tier without anyone listing it.

Selection. Without ``-m``, pytest runs the hermetic tests only and says how many slow-tier tests it left
out. With ``-m``, exactly what the expression selects runs: ``-m e2e`` is the e2e tier, ``-m "e2e or
node"`` two tiers, ``-m "not image"`` everything but the image tier. The Makefile names each tier as a
stage. Markers are strict (``--strict-markers``), so a misspelt tier is an error, not an empty run; a
tier's fixtures fail (never skip) when a binary is missing, which is right once it is selected.

Hypothesis. Every run loads the ``repeatable`` profile unless ``--hypothesis-profile explore`` names the
other (tests/fuzzing.py says what each is for): the same commit draws the same examples on any machine.
Under ``repeatable`` the pool of literals hypothesis lifts from the imported modules' source is kept empty,
so that what else a run imports or collects cannot change a suite's examples either.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants

TESTS = Path(__file__).resolve().parent
# Tier by path: a directory covers everything under it, a file only itself.
TIER_PATHS = {
    TESTS / "e2e": "e2e",
    TESTS / "differential" / "test_differential.py": "differential",
    TESTS / "e2e_node": "node",
    TESTS / "image": "image",
    TESTS / "ui_browser": "browser",
}
# Tier by fixture: a test that asks for one of these needs that tier's binaries wherever it lives.
TIER_FIXTURES = {"helm": "e2e", "kubectl": "e2e"}
# Hermetic but not fast (tests/test_tiers.py proves the fast tier is part of the unit tier without
# them): a directory covers everything under it, a file only itself.
NOT_FAST_PATHS = {
    TESTS / "test_tiers.py",  # pytest in subprocesses, to see what each tier selects
    TESTS / "test_packaging.py",  # builds the wheel and installs it in a new venv
    TESTS / "test_release.py",  # hack/release.sh's steps as scripts
    TESTS / "ui" / "test_server.py",  # the UI under gunicorn
    TESTS / "webhooks" / "test_serving.py",  # the webhooks under gunicorn, over TLS
    TESTS / "local" / "test_jsonlogs_torchrun.py",  # a torchrun training
    TESTS / "local" / "test_kubelet.py",  # process trees, killed and reaped
    TESTS / "local" / "test_process.py",
    TESTS / "local" / "test_network.py",  # network namespaces and listeners in them
    TESTS / "extensions" / "test_jsonlogs_sitecustomize.py",  # Python processes that log through it
    TESTS / "extensions" / "test_parameter_server_program.py",  # the parameter servers as processes
    TESTS / "install",  # renders the chart and generates every CRD and manifest: seconds per fixture
}
# Single tests that take seconds of CPU by design (bodies of the largest jobs, allocation measured), by
# file and function, every parametrization.
NOT_FAST_TESTS = {
    ("hooks/test_http.py", "test_the_default_body_limit_admits_the_resync_of_a_1000_replica_tfjob"),
    ("test_jsoncost.py", "test_the_estimate_is_at_least_what_parsing_allocates"),
    ("webhooks/test_children_bound.py", "test_the_estimate_bounds_the_children_from_above_within_half_again"),
}
# The helpers that start `trainop run` (and with it the training processes, or TensorBoard) or gunicorn.
PROCESS_HELPERS = frozenset({"tests.local.runs", "tests.local.tensorboards", "tests.servers", "subprocess"})


def register_profiles() -> None:
    """Register both profiles (tests/fuzzing.py says what each is for) and load `repeatable`.

    ``--hypothesis-profile explore`` loads the other one afterwards (hypothesis's pytest plugin, when
    pytest configures). Both happen before any test module is imported, so every `settings(...)` of the
    suites inherits what it does not set itself: nothing imported here may build a `settings`.
    """
    # Timing must not decide a verdict: a deadline or the too-slow health check fails under load.
    timeless: dict[str, Any] = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    settings.register_profile("repeatable", derandomize=True, database=None, **timeless)
    # No `database` argument: hypothesis's default, the directory `.hypothesis/examples`.
    settings.register_profile("explore", derandomize=False, print_blob=True, **timeless)
    settings.load_profile("repeatable")


register_profiles()


def pin_the_constant_pool() -> None:
    """Keep derandomized draws independent of what the process has imported.

    Now and then (one draw in twenty) hypothesis's provider draws a literal from a pool it fills from
    the source of every module in `sys.modules` outside site-packages, the standard library and test
    folders, refilled whenever `sys.modules` grows. Under a fixed seed the examples were therefore a
    function of what else the run had imported: a property passed alone and in a bare run but drew a
    failing body once the UI's modules were imported first, so its verdict changed with the company
    it ran in. The repeatable profile gets an empty pool (the built-in constants, the same in every
    process, stay); explore keeps hypothesis's pool, since its draws are fresh anyway.
    """
    # Private to hypothesis: a version that renames it must fail here, not quietly bring the pool back.
    collect = getattr(providers, "_get_local_constants", None)
    if collect is None or not hasattr(providers, "CONSTANTS_CACHE"):
        raise RuntimeError(
            "this hypothesis no longer has providers._get_local_constants: pin its constant pool anew "
            "(tests/conftest.py, pin_the_constant_pool) before upgrading"
        )
    empty = Constants()

    def local_constants() -> Constants:
        # The profile is loaded once per run, before any test draws, so the answer never changes mid-run
        # and hypothesis's cache of permitted constants never mixes the two pools.
        return empty if settings().derandomize else collect()

    providers._get_local_constants = local_constants
    # Nothing has drawn yet, but a cache filled from the old pool must not outlive it.
    providers.CONSTANTS_CACHE.cache.clear()


pin_the_constant_pool()


def tiers_of(item: pytest.Item) -> set[str]:
    path = Path(str(item.path)).resolve()
    found = {tier for where, tier in TIER_PATHS.items() if path == where or where in path.parents}
    found |= {TIER_FIXTURES[name] for name in getattr(item, "fixturenames", ()) if name in TIER_FIXTURES}
    return found


def _code_of(function: Any) -> Iterator[tuple[types.CodeType, dict[str, Any]]]:
    function = getattr(function, "__func__", function)
    code = getattr(function, "__code__", None)
    if code is not None:
        yield code, function.__globals__


def starts_processes(item: pytest.Item) -> bool:
    """Whether the test's code, a function of its module it calls or one of its fixtures names a helper
    of PROCESS_HELPERS (read from the code, not run)."""
    todo = list(_code_of(getattr(item, "function", None)))
    fixtures = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    todo += [pair for defs in fixtures.values() for d in defs for pair in _code_of(d.func)]
    seen: set[types.CodeType] = set()
    while todo:
        code, names = todo.pop()
        if code in seen:
            continue
        seen.add(code)
        todo += [(const, names) for const in code.co_consts if isinstance(const, types.CodeType)]
        for name in code.co_names:
            value = names.get(name)
            home = (
                value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            )
            if home in PROCESS_HELPERS:
                return True
            if isinstance(value, types.FunctionType) and value.__module__ == names.get("__name__"):
                todo += _code_of(value)
    return False


def is_fast(item: pytest.Item) -> bool:
    path = Path(str(item.path)).resolve()
    listed = any(path == where or where in path.parents for where in NOT_FAST_PATHS)
    function = getattr(item, "originalname", item.name)
    single = (path.relative_to(TESTS).as_posix(), function) in NOT_FAST_TESTS
    return not listed and not single and not starts_processes(item)


_LEFT_OUT: dict[str, int] = {}


# First, so that pytest's own -m selection sees the markers added here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    hermetic: list[pytest.Item] = []
    slow: list[pytest.Item] = []
    for item in items:
        tiers = tiers_of(item)
        for tier in sorted(tiers):
            item.add_marker(getattr(pytest.mark, tier))
        if not tiers and is_fast(item):
            item.add_marker(pytest.mark.fast)
        (slow if tiers else hermetic).append(item)
        for tier in tiers:
            _LEFT_OUT[tier] = _LEFT_OUT.get(tier, 0) + 1
    if config.option.markexpr:
        _LEFT_OUT.clear()
        return
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = hermetic


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _LEFT_OUT:
        counts = ", ".join(f"{tier} {n}" for tier, n in sorted(_LEFT_OUT.items()))
        terminalreporter.write_line(
            f"hermetic tiers only; left out the slow tiers' tests ({counts}): select one with -m <tier> "
            f"or make <tier>"
        )
