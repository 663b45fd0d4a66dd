"""The UI's bounded memories of answers from the apiserver: a size-capped cache whose entries expire, and
a token bucket that bounds how often a question may be asked at all.

Both take the time as an argument (a monotonic clock's reading), so their rules are pure of the clock and
a test steps time by hand. Neither locks: their one owner holds a lock around each call.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Expiring(Generic[K, V]):
    """At most `capacity` entries, each kept for the seconds it was put with; at the cap, the entry used
    least recently goes first, and expired entries are dropped when read and, from the least recently
    used end, whenever one is put."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K, now: float) -> tuple[bool, V | None]:
        """(True, value) while the entry lives, else (False, None)."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        if entry[0] <= now:
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, entry[1]

    def put(self, key: K, value: V, seconds: float, now: float) -> None:
        self._prune(now)
        self._entries[key] = (now + seconds, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def discard(self, key: K) -> None:
        self._entries.pop(key, None)

    def _prune(self, now: float) -> None:
        # The least recently used end holds the oldest entries: drop those that expired, stopping at the
        # first live one, so a put costs what it removes (memory is bounded by the cap either way).
        while self._entries:
            key, (expires, _) = next(iter(self._entries.items()))
            if expires > now:
                return
            del self._entries[key]


@dataclass
class Bucket:
    """`burst` questions at once, refilled at `per_second`."""

    per_second: float
    burst: int
    _tokens: float = -1.0
    _at: float = 0.0

    def take(self, now: float) -> bool:
        """Whether one more question may be asked now (and, if so, count it)."""
        if self._tokens < 0:
            self._tokens, self._at = float(self.burst), now
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.per_second)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def wait(self) -> int:
        """Whole seconds until the next question may be asked."""
        return max(1, int((1 - self._tokens) / self.per_second + 0.999))
