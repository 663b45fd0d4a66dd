"""Token buckets by key, as client-go's event spam filter keeps them (docs/limits.md#events-and-metrics).

Each key has a bucket of `burst` tokens, refilled at one per `refill_seconds`; taking from an empty one
fails. Only the `size` most recently used keys are remembered: a forgotten key starts full again, which
costs at most one more burst for a job not seen for a long time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from datetime import datetime


class Buckets:
    def __init__(self, burst: int, refill_seconds: float, size: int = 8192) -> None:
        self.burst = float(burst)
        self.refill_seconds = refill_seconds
        self.size = size
        self._buckets: OrderedDict[Hashable, tuple[float, datetime]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: Hashable, now: datetime) -> bool:
        """Take one token from `key`'s bucket at `now`; False (and nothing taken) when it is empty."""
        with self._lock:
            tokens, since = self._buckets.get(key, (self.burst, now))
            elapsed = max(0.0, (now - since).total_seconds())
            tokens = min(self.burst, tokens + elapsed / self.refill_seconds)
            allowed = tokens >= 1
            self._buckets[key] = (tokens - 1 if allowed else tokens, now)
            self._buckets.move_to_end(key)
            while len(self._buckets) > self.size:
                self._buckets.popitem(last=False)
            return allowed
