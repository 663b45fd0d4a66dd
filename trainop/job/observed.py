"""Reading the children Metacontroller observed: keys, ownership, pod phases and exit codes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trainop.api import constants as c
from trainop.jsontypes import Json

POD = "Pod.v1"
SERVICE = "Service.v1"
# What Metacontroller observed: child type key (`<Kind>.<apiVersion>`) -> name -> object.
Children = Mapping[str, Mapping[str, Json]]


def objects(children: Children, key: str) -> list[Json]:
    """The observed objects of one child type, sorted by name (v1 `name` and v2 `ns/name` keys alike)."""
    group = children.get(key) or {}
    return sorted(group.values(), key=lambda o: str(o.get("metadata", {}).get("name", "")))


@dataclass(frozen=True)
class ObservedPod:
    obj: Json

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"].get("uid") or "")

    @property
    def labels(self) -> Mapping[str, str]:
        return self.obj["metadata"].get("labels") or {}

    @property
    def rtype_label(self) -> str | None:
        return self.labels.get(c.LABEL_REPLICA_TYPE)

    @property
    def index(self) -> int | None:
        raw = self.labels.get(c.LABEL_REPLICA_INDEX)
        return int(raw) if raw is not None and str(raw).isdigit() else None

    @property
    def phase(self) -> str:
        return str((self.obj.get("status") or {}).get("phase") or "Pending")

    @property
    def deleting(self) -> bool:
        return bool(self.obj["metadata"].get("deletionTimestamp"))

    def container_statuses(self) -> list[Json]:
        status = self.obj.get("status") or {}
        return list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])

    def restart_count(self) -> int:
        return sum(int(s.get("restartCount") or 0) for s in self.container_statuses())

    def exit_code(self, container: str) -> int | None:
        """Exit code of the named container's last termination, if it terminated."""
        for status in (self.obj.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") != container:
                continue
            state = status.get("state") or {}
            terminated = state.get("terminated") or (status.get("lastState") or {}).get("terminated")
            if terminated and isinstance(terminated.get("exitCode"), int):
                return int(terminated["exitCode"])
        return None


def pods_of(children: Children, job_uid: str) -> list[ObservedPod]:
    """Pods this job controls; Metacontroller already filters, `trainop run` and tests may not."""
    return [ObservedPod(o) for o in objects(children, POD) if _controlled_by(o, job_uid)]


def _controlled_by(obj: Json, uid: str) -> bool:
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    controllers = [r for r in refs if r.get("controller")]
    return not controllers or any(r.get("uid") == uid for r in controllers)
