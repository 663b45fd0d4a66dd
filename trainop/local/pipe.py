"""The output of `trainop run` when its reader goes away (`trainop run job.yaml | head -2`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TextIO


class ReaderGone:
    """Writes to ``out`` until its reader closes the pipe; then calls ``gone`` once (the run stops as on
    a signal, so every pod is stopped and the run records its end) and sends the rest to /dev/null, where
    Python's own flush at exit cannot fail with a traceback either."""

    def __init__(self, out: TextIO, gone: Callable[[], None]) -> None:
        self.out = out
        self.gone = gone
        self.closed = False

    def write(self, text: str) -> int:
        try:
            return self.out.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.out.flush()
        except BrokenPipeError:
            self._reader_gone()
            self.out.flush()

    def isatty(self) -> bool:
        return self.out.isatty()

    def _reader_gone(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.out.fileno())
        finally:
            os.close(devnull)
        if not self.closed:
            self.closed = True
            self.gone()
