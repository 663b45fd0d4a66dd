"""Numbers the servers read from their environment, refused with the variable's name when malformed."""

from __future__ import annotations

import os
from collections.abc import Mapping

MAX_SECONDS = 3600.0


def positive_int_env(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a positive integer, got {raw!r}")
    return int(raw)


def seconds_env(name: str, default: float, environ: Mapping[str, str] | None = None) -> float:
    """A deadline: seconds above 0 and at most an hour."""
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_SECONDS:
        raise ValueError(f"{name} must be a number of seconds above 0 and at most 3600, got {raw!r}")
    return value
