"""Kubernetes timestamps (metav1.Time: RFC 3339, whole seconds, UTC)."""

from __future__ import annotations

from datetime import UTC, datetime

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def timestamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime(FORMAT)


def parse_timestamp(value: str) -> datetime:
    return datetime.strptime(value, FORMAT).replace(tzinfo=UTC)


def is_timestamp(value: str) -> bool:
    try:
        parse_timestamp(value)
    except ValueError:
        return False
    return True
