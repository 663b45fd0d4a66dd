"""`trainop run`'s apiserver and kubelet: applies the hook's desired children, reports them as observed.

Pods become `LocalPod`s; every other child (Services, ConfigMaps, RBAC, PodGroups) is stored as the
apiserver would store it, and ConfigMaps are also written out so that pods can mount them.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from trainop.api.kinds import KindInfo
from trainop.api.times import timestamp
from trainop.jsontypes import Json
from trainop.local.containers import ContainerPlan, PodSite, plan_pod
from trainop.local.devices import Allocator, Inventory, requested, visibility_env, with_env
from trainop.local.errors import template_path
from trainop.local.kubelet import LocalPod, RunEvent
from trainop.local.paths import inside, write_file
from trainop.local.sandbox import Sandbox
from trainop.local.volumes import DEFAULT_MODE, ConfigMapNotReady, local_dirs, materialize, write_config_map

POD_KEY = "Pod.v1"


def child_key(obj: Json) -> str:
    """Metacontroller's key for a child type, `<Kind>.<apiVersion>`: `Role.rbac.authorization.k8s.io/v1`."""
    return f"{obj.get('kind')}.{obj.get('apiVersion', 'v1')}"


@dataclass(frozen=True)
class UnscheduledPod:
    """A pod kept Pending because this machine cannot give it its devices now."""

    desired: Json
    reason: str
    uid: str
    created: datetime = field(default_factory=lambda: datetime.now(UTC))

    def observed(self) -> Json:
        meta = copy.deepcopy(self.desired.get("metadata") or {})
        meta.update(uid=self.uid, creationTimestamp=timestamp(self.created))
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": self.reason,
        }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": copy.deepcopy(self.desired.get("spec") or {}),
            "status": {"phase": "Pending", "conditions": [condition]},
        }


@dataclass
class LocalCluster:
    info: KindInfo
    base_dir: Path
    workdir: Path
    sandbox: Sandbox
    grace: float
    pods: dict[str, LocalPod] = field(default_factory=dict)
    # Deleted pods whose processes have not all exited yet; a same-named pod waits for them.
    terminating: dict[str, LocalPod] = field(default_factory=dict)
    objects: dict[str, dict[str, Json]] = field(default_factory=dict)
    devices: Allocator = field(default_factory=lambda: Allocator(Inventory()))
    # Pods that could not get their devices yet: Pending, as kube-scheduler keeps them.
    unscheduled: dict[str, UnscheduledPod] = field(default_factory=dict)
    # ConfigMaps of the job's own file (its scripts): present before the job, as `kubectl apply` of the
    # file creates them, and never reported to the hook as children of the job.
    given_config_maps: Mapping[str, Json] = field(default_factory=dict)
    # The job as Metacontroller's controller reference names it, set on every child stored, as
    # Metacontroller sets it on every child it creates: the sync mounts only ConfigMaps the job controls.
    owner: Json | None = None

    @property
    def logs_dir(self) -> Path:
        return self.workdir / "logs"

    def config_maps(self) -> dict[str, Json]:
        return {**self.given_config_maps, **self.objects.get("ConfigMap.v1", {})}

    # ---- apply --------------------------------------------------------------------------------------
    def apply(self, desired: list[Json], now: float) -> list[RunEvent]:
        """Make the local children what the hook asked for. Raises NotRunnableLocally before starting
        anything if a new pod cannot run here."""
        events: list[RunEvent] = []
        others = [o for o in desired if child_key(o) != POD_KEY]
        changed_maps = self._apply_objects(others)
        wanted = {str(p["metadata"]["name"]): p for p in desired if child_key(p) == POD_KEY}
        new = [p for name, p in wanted.items() if name not in self.pods and name not in self.terminating]
        plans = {str(p["metadata"]["name"]): self._plan(p) for p in new}
        for name in [n for n in self.unscheduled if n not in wanted]:
            del self.unscheduled[name]
        for pod in new:
            name = str(pod["metadata"]["name"])
            try:
                materialize(pod, self.config_maps(), self._dirs(pod), template_path(self.info, pod))
            except ConfigMapNotReady:
                continue
            grant = self.devices.allocate(name, requested(pod))
            if isinstance(grant, str):
                events += self._unschedulable(pod, grant)
                continue
            self.unscheduled.pop(name, None)
            visible = with_env(pod, visibility_env(self.devices.inventory, grant))
            init, main = plans[name] if visible is pod else self._plan(visible)
            env = self.sandbox.environment(name, self._own(pod, "home"))
            self.pods[name] = LocalPod(visible, init, main, self.logs_dir, env, self.sandbox.enter)
            events.append(RunEvent(name, "", "created"))
        for name in [n for n in self.pods if n not in wanted]:
            gone = self.pods.pop(name)
            gone.delete(self.grace, now)
            self.terminating[name] = gone
            events.append(RunEvent(name, "", "deleted"))
        if changed_maps:
            self._refresh_volumes(changed_maps)
        return events

    def _unschedulable(self, pod: Json, reason: str) -> list[RunEvent]:
        name = str(pod["metadata"]["name"])
        known = self.unscheduled.get(name)
        if known is not None and known.reason == reason:
            return []
        self.unscheduled[name] = UnscheduledPod(pod, reason, known.uid if known else str(uuid.uuid4()))
        return [RunEvent(name, "", f"Pending: {reason}")]

    def _plan(self, pod: Json) -> tuple[list[ContainerPlan], list[ContainerPlan]]:
        site = PodSite(base_dir=self.base_dir, volumes=self._dirs(pod))
        return plan_pod(pod, site, template_path(self.info, pod))

    def _dirs(self, pod: Json) -> dict[str, Path]:
        return local_dirs(pod, self._own(pod, "volumes"), template_path(self.info, pod))

    def _own(self, pod: Json, folder: str) -> Path:
        """The pod's own folder under `folder` of the run (its volumes, its home)."""
        return inside(self.workdir, folder, str(pod["metadata"]["name"]), field="metadata.name")

    def _apply_objects(self, desired: list[Json]) -> set[str]:
        """Store desired non-pod children as observed; returns the names of ConfigMaps whose data changed."""
        changed: set[str] = set()
        wanted: dict[str, dict[str, Json]] = {}
        for obj in desired:
            key, name = child_key(obj), str(obj["metadata"]["name"])
            current = self.objects.get(key, {}).get(name)
            stored = self._stored(obj, current)
            wanted.setdefault(key, {})[name] = stored
            if key == "ConfigMap.v1" and (current is None or current.get("data") != stored.get("data")):
                changed.add(name)
                self._write_config_map(stored)
        self.objects = wanted
        return changed

    def _stored(self, obj: Json, current: Json | None) -> Json:
        out = copy.deepcopy(obj)
        meta = out.setdefault("metadata", {})
        old = (current or {}).get("metadata") or {}
        meta.setdefault("namespace", "default")
        meta["uid"] = old.get("uid") or str(uuid.uuid4())
        meta["creationTimestamp"] = old.get("creationTimestamp") or timestamp(datetime.now(UTC))
        if self.owner is not None and not meta.get("ownerReferences"):
            meta["ownerReferences"] = [dict(self.owner)]
        return out

    def _write_config_map(self, config_map: Json) -> None:
        # For people reading the run afterwards; pods read their own copies under volumes/.
        name = str(config_map["metadata"]["name"])
        folder = inside(self.workdir, "configmaps", name, field=f"ConfigMap {name}: metadata.name")
        folder.mkdir(parents=True, exist_ok=True)
        for key, value in (config_map.get("data") or {}).items():
            file = inside(folder, key, field=f"ConfigMap {name}: data[{key}]")
            write_file(file, str(value), DEFAULT_MODE)

    def _refresh_volumes(self, names: set[str]) -> None:
        # kubelet updates mounted ConfigMaps in place (MPI's discover_hosts.sh changes as workers start).
        for pod in self.pods.values():
            spec = pod.desired.get("spec") or {}
            path = template_path(self.info, pod.desired)
            for i, volume in enumerate(spec.get("volumes") or []):
                source = volume.get("configMap")
                if source and source.get("name") in names:
                    target = self._dirs(pod.desired)[str(volume.get("name"))]
                    write_config_map(source, self.config_maps(), target, f"{path}.volumes[{i}].configMap")

    # ---- kubelet ------------------------------------------------------------------------------------
    def step(self, now: float) -> list[RunEvent]:
        events: list[RunEvent] = []
        for pod in [*self.pods.values(), *self.terminating.values()]:
            events += pod.step(now)
        for name in [n for n, p in self.terminating.items() if p.gone()]:
            del self.terminating[name]
            self.devices.release(name)
        # kube-scheduler no longer counts a pod that has ended: its devices go to the next one.
        for name in [n for n, p in self.pods.items() if p.phase in ("Succeeded", "Failed")]:
            self.devices.release(name)
        return events

    def observed(self) -> dict[str, dict[str, Json]]:
        out = {key: dict(group) for key, group in self.objects.items()}
        pods = {n: p.observed() for n, p in self.unscheduled.items()}
        pods.update({n: p.observed() for n, p in {**self.terminating, **self.pods}.items()})
        if pods:
            out[POD_KEY] = pods
        return out

    def all_pods(self) -> list[LocalPod]:
        return [*self.pods.values(), *self.terminating.values()]

    # ---- shutdown -----------------------------------------------------------------------------------
    def delete_all(self, now: float) -> None:
        for name, pod in list(self.pods.items()):
            pod.delete(self.grace, now)
            self.terminating[name] = pod
        self.pods.clear()

    def stop(self, poll: float = 0.05) -> None:
        """Stop every pod and wait until none of their processes is left: TERM, the grace period, KILL."""
        self.delete_all(time.monotonic())
        while self.terminating:
            self.step(time.monotonic())
            time.sleep(poll)

    def kill_all(self) -> None:
        for pod in self.all_pods():
            pod.kill()
