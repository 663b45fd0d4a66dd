"""A pytest plugin that writes a digest of every example each hypothesis test is called with.

Load it with ``-p tests.drawlog`` and name the log in ``TRAINOP_DRAW_LOG``; each call of a property's
body appends one line, ``<module>::<test> <digest of its arguments>``. tests/test_fuzz_determinism.py
compares the logs of differently composed runs to show that what a fuzz suite draws depends on the commit
alone.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

LOG_VARIABLE = "TRAINOP_DRAW_LOG"


def digest(arguments: dict[str, Any]) -> str:
    """Equal for equal examples in any process: repr of the JSON-shaped values and Raw the suites draw is
    stable, and the one non-JSON value they sample, a Flask test client, has no address in its repr."""
    text = repr(sorted(arguments.items()))
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:24]


def _logging(inner: Callable[..., Any], name: str, log: Path) -> Callable[..., Any]:
    @functools.wraps(inner)
    def logged(*args: Any, **kwargs: Any) -> Any:
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{name} {digest(kwargs)}\n")
        return inner(*args, **kwargs)

    return logged


# The items of a parametrized test share one function, which must be wrapped once.
_WRAPPED: set[Callable[..., Any]] = set()


# Last, so that only the items that will run are wrapped.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    log = os.environ.get(LOG_VARIABLE)
    if not log:
        return
    for item in items:
        # hypothesis calls `hypothesis.inner_test` of the wrapped test each time, so it may be replaced.
        test = getattr(item, "obj", None)
        handle = getattr(test, "hypothesis", None)
        if test is not None and handle is not None and test not in _WRAPPED:
            _WRAPPED.add(test)
            handle.inner_test = _logging(handle.inner_test, f"{test.__module__}::{test.__name__}", Path(log))
