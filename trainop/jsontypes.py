"""The one name for a JSON object as Kubernetes and Metacontroller send it: a dict of string keys."""

from __future__ import annotations

from typing import Any, TypeAlias

Json: TypeAlias = dict[str, Any]
