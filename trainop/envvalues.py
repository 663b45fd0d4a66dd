"""The settings kit: typed readers of the servers' environment variables, refused with one error.

Each reader declares a variable: its name, its default and what it expects. `read(environ)` gives the
default when the variable is unset or blank and the parsed value otherwise, or raises `SettingError`,
whose message always reads `NAME: expected WHAT, got 'VALUE'`. A server builds its one frozen settings
object from these at start-up (hooks.settings, webhooks.settings, trainop.ui.settings.UiSettings), so a
malformed value stops it there, naming the variable, instead of surfacing in a worker later.

A leaf: the standard library only, so every layer may read its settings with it.
"""

from __future__ import annotations

import math
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, NoReturn, TypeVar

T = TypeVar("T")
MAX_SECONDS = 3600.0
_BYTE_UNITS = {"": 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
_BYTE_SIZE = re.compile(r"([0-9]+)(Ki|Mi|Gi)?")


class SettingError(ValueError):
    """A variable whose value the server cannot use: `NAME: expected WHAT, got 'VALUE'`."""

    def __init__(self, name: str, expects: str, got: str | None) -> None:
        super().__init__(f"{name}: expected {expects}, got {'nothing' if got is None else repr(got)}")
        self.name = name


@dataclass(frozen=True)
class Reader(ABC, Generic[T]):
    """One environment variable: unset or blank is `default`; anything else is parsed or refused."""

    name: str
    default: T

    @property
    @abstractmethod
    def expects(self) -> str:
        """What a value must be, as the error message says it."""

    def read(self, environ: Mapping[str, str]) -> T:
        raw = environ.get(self.name, "")
        if not raw.strip():
            return self.default
        return self.parse(raw.strip(), raw)

    @abstractmethod
    def parse(self, value: str, raw: str) -> T:
        """The value of the stripped `value` (`raw` as set, for the error), or `refuse(raw)`."""

    def refuse(self, raw: str | None) -> NoReturn:
        raise SettingError(self.name, self.expects, raw)


@dataclass(frozen=True)
class Text(Reader[str]):
    """Any text, taken as written (without surrounding blanks); `blank` is what an empty value means
    where that differs from the default ("" for a bind that an empty value turns off)."""

    blank: str | None = None

    @property
    def expects(self) -> str:
        return "text"

    def read(self, environ: Mapping[str, str]) -> str:
        raw = environ.get(self.name)
        if raw is not None and not raw.strip() and self.blank is not None:
            return self.blank
        return super().read(environ)

    def parse(self, value: str, raw: str) -> str:
        return value


@dataclass(frozen=True)
class Required(Reader[str]):
    """Text that must be set: `why` says what needs it."""

    default: str = ""
    why: str = ""

    @property
    def expects(self) -> str:
        return f"a value ({self.why})"

    def read(self, environ: Mapping[str, str]) -> str:
        raw = environ.get(self.name)
        if raw is None or not raw.strip():
            self.refuse(raw)
        return self.parse(raw.strip(), raw)

    def parse(self, value: str, raw: str) -> str:
        return value


@dataclass(frozen=True)
class Names(Reader[tuple[str, ...]]):
    """A comma-separated list of names; blanks between commas are dropped."""

    default: tuple[str, ...] = ()

    @property
    def expects(self) -> str:
        return "comma-separated names"

    def parse(self, value: str, raw: str) -> tuple[str, ...]:
        return tuple(n.strip() for n in value.split(",") if n.strip())


@dataclass(frozen=True)
class OneOf(Reader[str]):
    """One of `choices`, compared case-insensitively and given back as listed."""

    choices: tuple[str, ...] = ()

    @property
    def expects(self) -> str:
        return "one of " + ", ".join(self.choices)

    def parse(self, value: str, raw: str) -> str:
        for choice in self.choices:
            if value.lower() == choice.lower():
                return choice
        self.refuse(raw)


@dataclass(frozen=True)
class Flag(Reader[bool]):
    @property
    def expects(self) -> str:
        return "true or false"

    def parse(self, value: str, raw: str) -> bool:
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        self.refuse(raw)


@dataclass(frozen=True)
class PositiveInt(Reader[int]):
    @property
    def expects(self) -> str:
        return "a positive integer"

    def parse(self, value: str, raw: str) -> int:
        if not (value.isascii() and value.isdigit()) or int(value) < 1:
            self.refuse(raw)
        return int(value)


@dataclass(frozen=True)
class Seconds(Reader[float]):
    """A duration: a number of seconds above 0 and at most `maximum`."""

    maximum: float = MAX_SECONDS

    @property
    def expects(self) -> str:
        return f"a number of seconds above 0 and at most {self.maximum:g}"

    def parse(self, value: str, raw: str) -> float:
        try:
            seconds = float(value)
        except ValueError:
            self.refuse(raw)
        if not (math.isfinite(seconds) and 0 < seconds <= self.maximum):
            self.refuse(raw)
        return seconds


@dataclass(frozen=True)
class ByteSize(Reader[int]):
    """A positive number of bytes, plain or with a binary suffix as Kubernetes writes them (Ki, Mi, Gi)."""

    @property
    def expects(self) -> str:
        return "a positive number of bytes (e.g. 8388608 or 8Mi)"

    def parse(self, value: str, raw: str) -> int:
        match = _BYTE_SIZE.fullmatch(value)
        if match is None or int(match[1]) < 1:
            self.refuse(raw)
        return int(match[1]) * _BYTE_UNITS[match[2] or ""]


def at_start_up(server: str, build: Callable[[], T]) -> T:
    """A server's settings, or the process ends with the bad variable's message on stderr (status 1)."""
    try:
        return build()
    except SettingError as exc:
        print(f"{server}: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
