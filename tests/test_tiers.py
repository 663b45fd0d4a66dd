"""A run without -m selects the hermetic tiers only, and each slow tier's marker selects that tier and
nothing else (tests/conftest.py): what a fresh clone with no cluster binary runs, and what each Makefile
stage runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIER_PREFIXES = {
    "e2e": "tests/e2e/",
    "differential": "tests/differential/test_differential.py::",
    "node": "tests/e2e_node/",
    "image": "tests/image/",
    "browser": "tests/ui_browser/",
}
# helm and kubectl come with the control plane's build: the tests that ask for them are e2e.
HELM_TEST = "tests/install/test_manifests.py::test_helm_lint"
KUBECTL_TEST = "tests/install/test_manifests.py::" + (
    "test_the_cert_manager_component_switches_the_webhooks_to_cert_managers_secret"
)
# Prints each selected test with the tier markers pytest sees on it.
PLUGIN = """
TIERS = {"e2e", "differential", "node", "image", "browser"}


def pytest_collection_finish(session):
    for item in session.items:
        tiers = sorted(m.name for m in item.iter_markers() if m.name in TIERS)
        print("SELECTED\t" + item.nodeid + "\t" + ",".join(tiers))
"""


def selected(tmp_path: Path, *args: str) -> dict[str, set[str]]:
    """{test id: its tier markers} of what `pytest *args` would run."""
    (tmp_path / "show_tiers.py").write_text(PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "show_tiers",
         *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [line.split("\t") for line in done.stdout.splitlines() if line.startswith("SELECTED\t")]
    return {row[1]: set(filter(None, row[2].split(","))) for row in rows}


def test_a_bare_run_selects_no_slow_tier_test(tmp_path: Path) -> None:
    tests = selected(tmp_path)
    assert {t: tiers for t, tiers in tests.items() if tiers} == {}
    assert [t for t in tests if t.startswith(tuple(TIER_PREFIXES.values()))] == []
    assert HELM_TEST not in tests and KUBECTL_TEST not in tests
    # Hermetic tests beside a slow tier's stay in.
    assert any(t.startswith("tests/differential/test_deliberate_differences.py::") for t in tests)
    assert any(t.startswith("tests/install/test_manifests.py::") for t in tests)


def test_each_tier_marker_selects_its_tier_only(tmp_path: Path) -> None:
    tests = selected(tmp_path, "-m", " or ".join(TIER_PREFIXES))
    for tier, prefix in TIER_PREFIXES.items():
        mine = {t for t, tiers in tests.items() if tier in tiers}
        assert mine, tier
        outside = {t for t in mine if not t.startswith(prefix)}
        if tier == "e2e":
            assert {HELM_TEST, KUBECTL_TEST} <= outside
            assert all(t.startswith("tests/install/") for t in outside), outside
        else:
            assert outside == set(), (tier, outside)
        assert all(t in mine for t in tests if t.startswith(prefix)), tier
    assert all(len(tiers) == 1 for tiers in tests.values())


def test_the_fast_tier_is_part_of_the_unit_tier_without_the_local_trainings(tmp_path: Path) -> None:
    unit = selected(tmp_path)
    fast = selected(tmp_path, "-m", "fast")
    assert set(fast) < set(unit)
    assert {t: tiers for t, tiers in fast.items() if tiers} == {}
    # Files all of whose tests start `trainop run` (the local trainings among them) or gunicorn.
    for slow in (
        "tests/local/test_run.py::",
        "tests/local/test_examples.py::",
        "tests/local/test_default_ps.py::",
        "tests/test_slow_clients.py::",
        "tests/hooks/test_forged_sync_gunicorn.py::",
    ):
        assert any(t.startswith(slow) for t in unit), slow
        assert not any(t.startswith(slow) for t in fast), slow
    # A test is judged by what its own code reaches, wherever it lives: this one runs `trainop run`, the
    # rest of its file does not.
    local_run = "tests/extensions/test_accelerators.py::" + (
        "test_trainop_run_refuses_an_unknown_profile_as_the_webhook_would"
    )
    assert local_run in unit and local_run not in fast
    assert any(t.startswith("tests/extensions/test_accelerators.py::") for t in fast)
    # What the fast tier is for: the pure core, the HTTP edges, admission, the extensions and the UI.
    for folder in ("controller", "hooks", "webhooks", "extensions", "ui", "frameworks"):
        assert any(t.startswith(f"tests/{folder}/") for t in fast), folder
    # `make fast` runs it in two halves that together are exactly the marker's selection.
    [half] = re.findall(r"^FAST_HALF = (.+)$", (REPO / "Makefile").read_text(), re.M)
    first = selected(tmp_path, "-m", "fast", *half.split())
    second = selected(tmp_path, "-m", "fast", *(f"--ignore={path}" for path in half.split()))
    assert first and second
    assert set(first) | set(second) == set(fast) and not set(first) & set(second)
