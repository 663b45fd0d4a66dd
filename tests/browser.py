"""Debian's chromium under playwright, for the tests that look at pages: where it is, how it starts and
where the screenshots go ($TRAINOP_ARTIFACTS/ui, default tests/artifacts/ui, not committed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("TRAINOP_CHROMIUM", "/usr/bin/chromium"))


def artifacts_dir() -> Path:
    folder = Path(os.environ.get("TRAINOP_ARTIFACTS") or REPO / "tests" / "artifacts") / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def launched() -> Iterator[Browser]:
    assert CHROMIUM.is_file(), f"{CHROMIUM} missing: install Debian's chromium (hack/install-browser.sh)"
    with sync_playwright() as p:
        # As root (CI), chromium's sandbox cannot start; the pages are our own.
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
