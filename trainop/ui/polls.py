"""One read shared by every stream that shows the same thing: a poller per key, started by its first
subscriber and stopped when its last one leaves, so what the apiserver is asked grows with the jobs
being watched, not with the browsers watching them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class _Shared(Generic[T]):
    def __init__(self, name: str, period: float) -> None:
        self.period = period
        self.cond = threading.Condition()
        self.version = 0
        self.outcome: T | Exception | None = None
        # Each subscriber's own read (made with its credentials); the newest one is used, so a reader
        # who left is never read as.
        self.readers: dict[int, Callable[[], T]] = {}
        self.reads = 0
        self.thread = threading.Thread(target=self._run, name=f"poll-{name}", daemon=True)

    def _run(self) -> None:
        while True:
            with self.cond:
                if not self.readers:
                    return
                read = list(self.readers.values())[-1]
            try:
                outcome: T | Exception = read()
            except Exception as exc:  # handed to every subscriber, which decides what it means
                outcome = exc
            with self.cond:
                self.outcome = outcome
                self.version += 1
                self.reads += 1
                self.cond.notify_all()
                self.cond.wait_for(lambda: not self.readers, timeout=self.period)


@dataclass(frozen=True)
class Subscription(Generic[T]):
    shared: _Shared[T]

    def next(self, after: int, timeout: float) -> tuple[int, T] | None:
        """The first read newer than version `after` with its version; None if none came in `timeout`.
        A read that raised raises here."""
        shared = self.shared
        with shared.cond:
            if not shared.cond.wait_for(lambda: shared.version > after, timeout=timeout):
                return None
            version, outcome = shared.version, shared.outcome
        if isinstance(outcome, Exception):
            raise outcome
        return version, outcome  # type: ignore[return-value]


class Polls(Generic[T]):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shared: dict[Hashable, _Shared[T]] = {}
        self._ids = 0

    @contextmanager
    def subscribe(self, key: Hashable, read: Callable[[], T], period: float) -> Iterator[Subscription[T]]:
        """A subscription to `key`'s poller, which reads every `period` seconds while anyone holds one."""
        with self._lock:
            self._ids += 1
            me = self._ids
            shared = self._shared.get(key)
            fresh = shared is None
            if shared is None:
                shared = self._shared[key] = _Shared(str(key), period)
            with shared.cond:
                shared.readers[me] = read
            if fresh:
                shared.thread.start()
        try:
            yield Subscription(shared)
        finally:
            # Under the registry's lock, so a poller whose readers are gone is never handed out again.
            with self._lock, shared.cond:
                del shared.readers[me]
                if not shared.readers:
                    self._shared.pop(key, None)
                shared.cond.notify_all()

    def active(self) -> dict[Hashable, int]:
        """Each polled key with its subscriber count."""
        with self._lock:
            return {key: len(shared.readers) for key, shared in self._shared.items()}

    def threads(self) -> list[threading.Thread]:
        with self._lock:
            return [shared.thread for shared in self._shared.values()]

    def reads(self, key: Hashable) -> int:
        """How many reads `key`'s poller has made (0 when nobody subscribes)."""
        with self._lock:
            shared = self._shared.get(key)
            return shared.reads if shared else 0
