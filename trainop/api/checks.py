"""What a validation finds, as values: field-named errors and warnings, and the checks every kind shares.

Every error names the field path (Kubeflow's `spec.<map>[<Type>]...` form), says what is wrong and what
is allowed, so a user can fix the YAML from the message alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FieldError:
    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}"


@dataclass
class Result:
    """Collects the findings of one validation; the checks append to it as they walk the job."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def message(self) -> str:
        return "; ".join(str(e) for e in self.errors)

    def error(self, path: str, detail: str) -> None:
        self.errors.append(FieldError(path, detail))


def quote_all(values: Iterable[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def check_enum(result: Result, path: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        result.error(path, f'Unsupported value: "{value}": supported values: {quote_all(allowed)}')


def check_non_negative(result: Result, path: str, value: Any) -> None:
    if isinstance(value, int) and value < 0:
        result.error(path, f"Invalid value: {value}: must be greater than or equal to 0")
