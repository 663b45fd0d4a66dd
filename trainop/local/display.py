"""What a person sees while a job runs: a live table on a terminal, plain lines everywhere else."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from typing import Protocol, TextIO

from trainop.local.logs import parse_record, readable


@dataclass(frozen=True)
class Row:
    replica: str
    state: str
    restarts: int
    elapsed: float  # seconds since the pod started
    active: bool = False  # still Pending or Running

    def cells(self) -> tuple[str, str, str, str]:
        return (self.replica, self.state, str(self.restarts), duration(self.elapsed))


def duration(seconds: float) -> str:
    seconds = int(seconds)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


# Records at these levels stand out in a live display.
LEVEL_COLOURS = {"WARNING": "\x1b[33m", "ERROR": "\x1b[31m", "CRITICAL": "\x1b[1;31m"}

HEADER = ("REPLICA", "STATE", "RESTARTS", "ELAPSED")


def table(rows: list[Row], title: str) -> list[str]:
    cells = [HEADER, *(r.cells() for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip() for c in cells]
    return [*lines, title]


class Display(Protocol):
    def log(self, prefix: str, line: str) -> None: ...
    def event(self, text: str) -> None: ...
    def status(self, rows: list[Row], title: str) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class PlainDisplay:
    """One line per log line or event, for pipes, files and CI logs; state changes arrive as events."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def log(self, prefix: str, line: str) -> None:
        record = parse_record(line)
        if record is None:
            self.out.write(f"{prefix} {line}\n")
            return
        for text in readable(prefix, record):
            self.out.write(text + "\n")

    def event(self, text: str) -> None:
        self.out.write(f"trainop: {text}\n")

    def status(self, rows: list[Row], title: str) -> None:
        return None

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        self.out.flush()


class LiveDisplay:
    """Logs scroll above a status table that is erased and redrawn below them on every flush."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.pending: list[str] = []
        self.lines: list[str] = []
        self.drawn = 0

    def log(self, prefix: str, line: str) -> None:
        record = parse_record(line)
        if record is None:
            self.pending.append(f"\x1b[36m{prefix}\x1b[0m {line}")
            return
        colour = LEVEL_COLOURS.get(record.level)
        if colour:
            # Padded before painting: the escapes would count towards the column's width.
            record = replace(record, level=f"{colour}{record.level:<7}\x1b[0m")
        self.pending += readable(f"\x1b[36m{prefix}\x1b[0m", record)

    def event(self, text: str) -> None:
        self.pending.append(f"\x1b[2mtrainop: {text}\x1b[0m")

    def status(self, rows: list[Row], title: str) -> None:
        # A wrapped line would throw off how many lines the next flush erases.
        width = max(shutil.get_terminal_size().columns - 1, 20)
        self.lines = [line[:width] for line in table(rows, title)]

    def flush(self) -> None:
        if self.drawn:
            # Up to the first line of the old table, then clear to the end of the screen.
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")
        for line in self.pending:
            self.out.write(line + "\n")
        self.pending.clear()
        for i, line in enumerate(self.lines):
            self.out.write(f"\x1b[1m{line}\x1b[0m\n" if i == 0 else line + "\n")
        self.drawn = len(self.lines)
        self.out.flush()

    def close(self) -> None:
        # The summary that follows has the final table; a last live one would only repeat it stale.
        self.lines = []
        self.flush()
