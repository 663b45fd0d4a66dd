"""Server-sent events, the one way the list's cells, a job's page and its logs follow a job.

Each open stream holds a thread, so their number is bounded (a pool of `total`, and `per_user` of them
for one user) and each one ends after `seconds` (the browser reconnects by itself) or as soon as its
client goes, with every read it held open.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Hashable, Iterator
from typing import Any

from flask import Response

# Every event stream's path starts so: the server gives those answers the stream's lifetime to finish.
STREAM_PREFIX = "/stream/"
# A comment line: sent while nothing changed, so a write fails (and the stream ends) once its client went.
IDLE = ": idle\n\n"


def event(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


class Changes:
    """What of a page's elements (an element's id to its HTML) differs from what was sent before: each
    snapshot handed to `update` is sent as only its changed elements, the whole of the first one."""

    def __init__(self) -> None:
        self._sent: dict[str, str] = {}

    def update(self, name: str, snapshot: dict[str, str]) -> str:
        """The event `name` with the elements that changed, or IDLE when none did."""
        changed = {k: v for k, v in snapshot.items() if self._sent.get(k) != v}
        self._sent.update(changed)
        return event(name, changed) if changed else IDLE


class Streams:
    """The open event streams: at most `total` at once, `per_user` of them for one user (None: no quota,
    the pool alone bounds a UI without sign-in), each ending after `seconds`."""

    def __init__(self, total: int, per_user: int | None, seconds: float) -> None:
        self.per_user = per_user
        self.seconds = seconds
        self._pool = threading.BoundedSemaphore(total)
        self._held: Counter[Hashable] = Counter()
        self._lock = threading.Lock()

    def open(self, who: Hashable, events: Callable[[], Generator[str]]) -> Response:
        """The answer that streams what `events()` yields for `who`, or a 429 (their quota is used) or a
        503 (the pool is); `events` is called only once the stream starts, and what it returned is closed
        when the stream ends, however it ends."""
        with self._lock:
            if self.per_user is not None and self._held[who] >= self.per_user:
                return Response(
                    f"you have {self._held[who]} event streams open, the most one user may "
                    f"({self.per_user}, TRAINOP_UI_MAX_USER_STREAMS): close other tabs of this UI\n",
                    429,
                    {"Retry-After": "5"},
                )
            if not self._pool.acquire(blocking=False):
                return Response("too many open streams; try again later\n", 503, {"Retry-After": "5"})
            self._held[who] += 1
        return Response(
            self._body(who, events, time.monotonic() + self.seconds),
            mimetype="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    def _body(self, who: Hashable, make: Callable[[], Generator[str]], deadline: float) -> Iterator[str]:
        # Closed by the server when the client goes (a write failed) or the stream ends: the events are
        # closed with it, which stops every poll and follow they held.
        try:
            events = make()
        except BaseException:
            self._release(who)
            raise
        try:
            yield "retry: 2000\n\n"
            for chunk in events:
                yield chunk
                if time.monotonic() > deadline:
                    return
        finally:
            events.close()
            self._release(who)

    def _release(self, who: Hashable) -> None:
        with self._lock:
            self._held[who] -= 1
            if not self._held[who]:
                del self._held[who]
        self._pool.release()
