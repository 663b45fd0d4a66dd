"""The browser tier: the real `trainop ui` and `trainop run` in subprocesses, driven in Debian's chromium.

Screenshots go to $TRAINOP_ARTIFACTS/ui (default tests/artifacts/ui, not committed), one per page state a
test reaches, for a person to look at.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from tests.browser import artifacts_dir, launched
from tests.local.runs import REPO, env


@pytest.fixture(scope="session")
def artifacts() -> Path:
    return artifacts_dir()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with launched() as b:
        yield b


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
def serve(runs: Path, page: Page) -> Iterator[Serve]:
    """Starts `trainop ui RUNS_DIR --port 0 [args]`, opens the address it printed (with its token) in
    `page`, as a person does, and returns the UI's address without the token: the page's browser holds
    the cookie the token was exchanged for."""
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
        printed = line.split(" at ", 1)[1].split()[0]
        page.goto(printed)
        base, _, token = printed.partition("?token=")
        assert token and page.url == base, page.url
        return base

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=30)
