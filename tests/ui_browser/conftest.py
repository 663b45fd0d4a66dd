"""The browser tier: the real `trainop ui` and `trainop run` in subprocesses, driven in Debian's chromium.

Screenshots go to $TRAINOP_ARTIFACTS/ui (default tests/artifacts/ui, not committed), one per page state a
test reaches, for a person to look at.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.local.runs import REPO, env

CHROMIUM = Path(os.environ.get("TRAINOP_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture(scope="session")
def artifacts() -> Path:
    folder = Path(os.environ.get("TRAINOP_ARTIFACTS") or REPO / "tests" / "artifacts") / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.is_file(), f"{CHROMIUM} missing: install Debian's chromium (hack/install-browser.sh)"
    with sync_playwright() as p:
        # As root (CI), chromium's sandbox cannot start; the pages are our own.
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


Serve = Callable[..., str]


@pytest.fixture
def serve(runs: Path) -> Iterator[Serve]:
    """Starts `trainop ui RUNS_DIR --port 0 [args]` and returns the URL it printed."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainop.cli", "ui", str(runs), "--port", "0", *args],
            cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert " at http://" in line, line
        return line.split(" at ", 1)[1].split()[0]

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)
