"""What parsing a request body will cost in memory, known before parsing it, and a per-process budget for it.

A JSON body's size says little about the memory its parsed value takes: `[],` is 3 bytes and a Python
list of ~72, so 8 MiB of empty arrays become ~200 MiB of objects, more than real Kubernetes objects of the
same size take by a factor of 5-10. Both HTTP edges therefore estimate the parsed size from the raw bytes
(a few `bytes.count` calls, at memory speed, no copy), refuse a body whose estimate is out of proportion
to its size, and hold the estimate against a per-process budget while the request is being answered, so
that concurrent large bodies wait (or are told to retry) instead of taking the worker past its memory
limit together. docs/limits.md states the limits and what a client sees.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

# Python bytes per JSON byte that opens a container or separates two values, measured for CPython 3.11
# with orjson: a list ~72 B (with its slot in the parent), a dict ~200 B, any further value ~72 B at most
# (a float 24-40 B, a short string ~72 B, a dict entry ~72 B). Bytes inside strings are counted too, so
# the estimate is an upper bound: a 3-byte `[],` is estimated at 144 B and takes ~72 B.
COST_PER_COMMA = 72
COST_PER_BRACKET = 72
COST_PER_BRACE = 200
# A realistic Metacontroller request (pods with status and managedFields, tests/realistic.py) is
# estimated at 6.6x its size, a TFJob's resync (long TF_CONFIG strings) at 3.2x, AdmissionReviews of our
# examples at 3-7x; hostile bodies of empty containers at 30-48x, of 2-character strings at ~15x.
MAX_COST_PER_BYTE = 8
# Small bodies may be dense: a few MiB of objects cost nothing a worker cannot hold.
COST_FLOOR = 16 * 1024 * 1024


class TooCostly(ValueError):
    """The body would take more memory once parsed than any real request of its size; for an HTTP 413."""


def parse_cost(data: bytes, start: int = 0, end: int | None = None) -> int:
    """An upper-bound estimate of the memory (bytes) that parsing `data[start:end]` as JSON allocates.

    Additive: the cost of a body is the sum of the costs of any split of it, so a part can be judged on
    its own (no copy is made)."""
    stop = len(data) if end is None else min(end, len(data))
    return (
        max(0, stop - start)
        + COST_PER_COMMA * data.count(b",", start, stop)
        + COST_PER_BRACKET * data.count(b"[", start, stop)
        + COST_PER_BRACE * data.count(b"{", start, stop)
    )


_SPACE = re.compile(r"[ \t\n\r]*")


def leading_member(data: bytes, key: str, before: tuple[str, ...], limit: int) -> tuple[Any, int] | None:
    """The value of the member `key` of the JSON object `data`, and the byte offset where it ends, when
    only members named in `before` precede it and it ends within the first `limit` bytes; else None.

    Only those members are parsed (by the standard library's C scanner), never what follows them, so
    a caller can learn from the head of a large body what the rest of it may cost before parsing it.
    Their memory is at most parse_cost of the head, which the caller holds already."""
    text = data[:limit].decode("utf-8", "surrogateescape")
    decoder = json.JSONDecoder()
    at = _skip(text, 0)
    if not text.startswith("{", at):
        return None
    at += 1
    try:
        while True:
            at = _skip(text, at)
            name, at = decoder.raw_decode(text, at)
            at = _skip(text, at)
            if not isinstance(name, str) or not text.startswith(":", at) or name not in (key, *before):
                return None
            value, at = decoder.raw_decode(text, _skip(text, at + 1))
            if name == key:
                return value, len(text[:at].encode("utf-8", "surrogateescape"))
            at = _skip(text, at)
            if not text.startswith(",", at):
                return None
            at += 1
    except (ValueError, RecursionError):  # not JSON, or cut off at `limit`
        return None


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def check_parse_cost(data: bytes, most: int) -> int:
    """The estimated parse cost of `data`; TooCostly when it is out of proportion to the body's size, or
    over `most` (a process's whole budget: such a body could never be parsed beside anything else)."""
    cost = parse_cost(data)
    allowed = max(COST_FLOOR, MAX_COST_PER_BYTE * len(data))
    if cost > allowed:
        raise TooCostly(
            f"the body's {len(data)} bytes hold {data.count(b'[') + data.count(b'{')} JSON arrays and "
            f"objects and {data.count(b',')} separators: parsed, it would take ~{cost >> 20} MiB, more "
            f"than {MAX_COST_PER_BYTE} times its size (the most a Kubernetes object of that size takes)"
        )
    if cost > most:
        raise TooCostly(
            f"the body's {len(data)} bytes would take ~{cost} bytes parsed, more than the {most} bytes "
            "this server parses at once"
        )
    return cost


@dataclass
class Budget:
    """Bytes of estimated parse cost that the requests in flight in this process may hold together.

    Callers refuse a body that alone costs more (check_parse_cost's `most`); a claim larger than the
    limit (a declared length, before the body is read) is clamped to it, so it waits for an idle process.
    """

    limit: int

    def __post_init__(self) -> None:
        self._held = 0
        self._cond = threading.Condition()

    @property
    def held(self) -> int:
        with self._cond:
            return self._held

    def acquire(self, cost: int, wait: float) -> int | None:
        """Take `cost` (clamped to the limit) within `wait` seconds; the amount taken, or None."""
        amount = min(cost, self.limit)
        deadline = time.monotonic() + wait
        with self._cond:
            while self._held + amount > self.limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            self._held += amount
            return amount

    def release(self, amount: int) -> None:
        with self._cond:
            self._held -= amount
            self._cond.notify_all()


@dataclass
class Claim:
    """One request's share of a Budget, grown as the request learns what it costs."""

    budget: Budget
    held: int = 0

    def grow(self, cost: int, wait: float) -> bool:
        """Hold `cost` instead of what is held now, within `wait` seconds; False (holding nothing) if not."""
        if cost <= self.held:
            return True
        self.release()
        taken = self.budget.acquire(cost, wait)
        if taken is None:
            return False
        self.held = taken
        return True

    def release(self) -> None:
        self.budget.release(self.held)
        self.held = 0
