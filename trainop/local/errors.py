"""The one error a pod raises when it needs something only a cluster has, named by the job's field path."""

from __future__ import annotations

from trainop.api import constants as c
from trainop.api.kinds import KindInfo
from trainop.jsontypes import Json


class NotRunnableLocally(Exception):
    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


def template_path(info: KindInfo, pod: Json) -> str:
    """Where in the job a pod's spec came from, so errors point at the line the user wrote."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    rtype = info.canonical_type(str(labels.get(c.LABEL_REPLICA_TYPE, ""))) or "?"
    return f"spec.{info.replica_field}[{rtype}].template.spec"
