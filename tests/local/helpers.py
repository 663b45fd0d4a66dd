"""Shared by the local tests: the fixture replica, and finding processes by a tag in their argv."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

BEHAVE = Path(__file__).parent / "fixtures" / "behave.py"


def behave(*args: str) -> list[str]:
    return [sys.executable, str(BEHAVE), *args]


def new_tag() -> str:
    return f"trainop-test-{uuid.uuid4().hex}"


def pids_tagged(tag: str) -> list[int]:
    """Live (non-zombie) processes whose argv mentions `tag`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def eventually(check: Callable[[], bool], timeout: float = 60.0, interval: float = 0.05) -> bool:
    """Whether `check` comes true within `timeout`: what a process does (start, exit, die of a signal)
    takes the OS milliseconds, and seconds on a loaded machine; the timeout is spent only on a bug."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return check()
