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

Selection. Without ``-m``, pytest runs the hermetic tests only and says how many slow-tier tests it left
out. With ``-m``, exactly what the expression selects runs: ``-m e2e`` is the e2e tier, ``-m "e2e or
node"`` two tiers, ``-m "not image"`` everything but the image tier. The Makefile names each tier as a
stage. Markers are strict (``--strict-markers``), so a misspelt tier is an error, not an empty run; a
tier's fixtures fail (never skip) when a binary is missing, which is right once it is selected.

Hypothesis. Every run loads the ``repeatable`` profile unless ``--hypothesis-profile explore`` names the
other (tests/fuzzing.py says what each is for): the same commit draws the same examples on any machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

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


def tiers_of(item: pytest.Item) -> set[str]:
    path = Path(str(item.path)).resolve()
    found = {tier for where, tier in TIER_PATHS.items() if path == where or where in path.parents}
    found |= {TIER_FIXTURES[name] for name in getattr(item, "fixturenames", ()) if name in TIER_FIXTURES}
    return found


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
