"""A tiny cluster for driving the sync hook the way Metacontroller and the kubelet would.

`Cluster.sync()` sends the job and its observed children to `trainop.controller.sync.sync`, then applies
the answer
as Metacontroller does: status replaces the parent's status (plus observedGeneration), children missing
from the answer are deleted, new ones are created with the controller-uid label, the controllerRef,
the last-applied annotation and the server-side fields (uid, resourceVersion, creationTimestamp, status).
Tests then play kubelet (`run`, `fail`, `succeed`, ...) and sync again.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

# The clock and Metacontroller's annotation are the builders', re-exported for the tests that take them
# with the fake.
from tests.builders import LAST_APPLIED as LAST_APPLIED
from tests.builders import STAMP0 as STAMP0
from tests.builders import T0 as T0
from tests.builders import at as at
from tests.builders import stamp as stamp
from trainop.controller.sync import SyncResult, sync
from trainop.job.settings import Settings
from trainop.jsontypes import Json

# The childResources of every kind's CompositeController: Metacontroller sends each rule, even when empty.
CHILD_TYPES = (
    "Pod.v1",
    "Service.v1",
    "ConfigMap.v1",
    "ServiceAccount.v1",
    "Role.rbac.authorization.k8s.io/v1",
    "RoleBinding.rbac.authorization.k8s.io/v1",
    "HorizontalPodAutoscaler.autoscaling/v2",
    "PodGroup.scheduling.volcano.sh/v1beta1",
    "PodGroup.scheduling.x-k8s.io/v1alpha1",
    "PodGroup.scheduling.k8s.io/v1alpha2",
    "Deployment.apps/v1",
    "NetworkPolicy.networking.k8s.io/v1",
)


def key_of(obj: Json) -> str:
    return f"{obj['kind']}.{obj['apiVersion']}"


def canonical(value: Any) -> str:
    """Byte-for-byte comparable form of a JSON value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


class Cluster:
    """One job and its children, as the apiserver would hold them."""

    def __init__(
        self,
        job: Json,
        settings: Settings | None = None,
        now: datetime = T0,
        v2_keys: bool = False,
        instant_delete: bool = True,
    ) -> None:
        self.job = copy.deepcopy(job)
        self.job.setdefault("metadata", {}).setdefault("uid", f"uid-{self.job['metadata']['name']}")
        self.job["metadata"].setdefault("generation", 1)
        self.job.setdefault("status", {})
        self.settings = settings or Settings()
        self.now = now
        self.v2_keys = v2_keys
        self.instant_delete = instant_delete
        self.objects: dict[str, dict[str, Json]] = {t: {} for t in CHILD_TYPES}
        self.history: list[SyncResult] = []
        self.created: list[str] = []
        self.deleted: list[str] = []
        # Children Metacontroller would write (PUT) because the desired object differs from last-applied.
        self.updated: list[str] = []
        self._serial = 0

    # ---- what Metacontroller sends ----------------------------------------------------------------
    @property
    def uid(self) -> str:
        return str(self.job["metadata"]["uid"])

    @property
    def namespace(self) -> str:
        return str(self.job["metadata"].get("namespace") or "default")

    def children(self) -> dict[str, dict[str, Json]]:
        out: dict[str, dict[str, Json]] = {}
        for ctype, group in self.objects.items():
            out[ctype] = {}
            for name, obj in group.items():
                key = f"{obj['metadata'].get('namespace', self.namespace)}/{name}" if self.v2_keys else name
                out[ctype][key] = copy.deepcopy(obj)
        return out

    def request(self, finalizing: bool = False) -> Json:
        return {
            "controller": {
                "apiVersion": "metacontroller.k8s.io/v1alpha1",
                "kind": "CompositeController",
                "metadata": {"name": f"trainop-{self.job['kind'].lower()}-controller"},
                "spec": {"generateSelector": True},
            },
            "parent": copy.deepcopy(self.job),
            "children": self.children(),
            "related": {},
            "finalizing": finalizing,
        }

    # ---- one round trip ---------------------------------------------------------------------------
    def sync(self, advance: float = 0, apply: bool | str = True) -> SyncResult:
        """One hook call; `apply="status"` writes only the status (docs/design.md#order-of-a-sync)."""
        self.now += timedelta(seconds=advance)
        result = sync(copy.deepcopy(self.job), self.children(), self.settings, self.now)
        self.history.append(result)
        problems = json_hygiene_problems(result.response())
        assert not problems, problems
        if apply == "status":
            self.write_status(result)
        elif apply:
            self.apply(result)
        return result

    def write_status(self, result: SyncResult) -> None:
        self.job["status"] = {
            **copy.deepcopy(result.status),
            "observedGeneration": self.job["metadata"]["generation"],
        }

    def apply(self, result: SyncResult) -> None:
        """Metacontroller's steps 10-12: labels, delete, create/update, status write."""
        desired = {(key_of(o), o["metadata"]["name"]): copy.deepcopy(o) for o in result.children}
        for ctype, group in self.objects.items():
            for name in list(group):
                if (ctype, name) in desired or group[name]["metadata"].get("deletionTimestamp"):
                    continue
                # Metacontroller deletes only the children it owns.
                if self._owned(group[name]):
                    self.delete(ctype, name)
        for (ctype, name), obj in desired.items():
            obj["metadata"].setdefault("namespace", self.namespace)
            obj["metadata"].setdefault("labels", {}).setdefault("controller-uid", self.uid)
            group = self.objects.setdefault(ctype, {})
            if name in group:
                self._update(group[name], obj)
            else:
                group[name] = self._create(obj)
                self.created.append(name)
        self.write_status(result)

    def _owned(self, obj: Json) -> bool:
        refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]
        return not refs or any(r.get("uid") == self.uid for r in refs)

    def delete(self, ctype: str, name: str) -> None:
        self.deleted.append(name)
        if self.instant_delete:
            del self.objects[ctype][name]
        else:
            self.objects[ctype][name]["metadata"]["deletionTimestamp"] = self.timestamp()

    def finish_deletions(self) -> None:
        for group in self.objects.values():
            for name in [n for n, o in group.items() if o["metadata"].get("deletionTimestamp")]:
                del group[name]

    def timestamp(self) -> str:
        return self.now.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _create(self, desired: Json) -> Json:
        self._serial += 1
        obj = copy.deepcopy(desired)
        meta = obj["metadata"]
        meta.setdefault("annotations", {})[LAST_APPLIED] = canonical(desired)
        meta["ownerReferences"] = [
            {
                "apiVersion": self.job["apiVersion"],
                "kind": self.job["kind"],
                "name": self.job["metadata"]["name"],
                "uid": self.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        meta["uid"] = f"{meta['name']}-uid-{self._serial}"
        meta["resourceVersion"] = str(1000 + self._serial)
        meta["creationTimestamp"] = self.timestamp()
        meta["managedFields"] = [{"manager": "metacontroller", "operation": "Update"}]
        if obj["kind"] == "Pod":
            obj["spec"].setdefault("dnsPolicy", "ClusterFirst")
            obj["spec"].setdefault("terminationGracePeriodSeconds", 30)
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif obj["kind"] == "Service":
            obj["spec"].update(
                clusterIPs=["None"], ipFamilies=["IPv4"], sessionAffinity="None", type="ClusterIP"
            )
            obj["status"] = {"loadBalancer": {}}
        elif obj["kind"] == "PodGroup":
            obj["status"] = {"phase": "Pending"}
        return obj

    def _update(self, observed: Json, desired: Json) -> None:
        # Pods use OnDelete (never updated); the rest is applied in place.
        if observed["kind"] == "Pod":
            return
        meta = observed["metadata"]
        if meta.get("annotations", {}).get(LAST_APPLIED) == canonical(desired):
            return  # the three-way merge changes nothing: no request
        self.updated.append(observed["metadata"]["name"])
        annotations = {k: v for k, v in meta.get("annotations", {}).items() if k != LAST_APPLIED}
        annotations.update(desired["metadata"].get("annotations") or {})
        annotations[LAST_APPLIED] = canonical(desired)
        meta["annotations"] = annotations
        meta["labels"] = {**meta.get("labels", {}), **desired["metadata"].get("labels", {})}
        for field in desired:
            if field not in ("metadata", "apiVersion", "kind", "status"):
                if isinstance(desired[field], dict) and isinstance(observed.get(field), dict):
                    observed[field] = {**observed[field], **desired[field]}
                else:
                    observed[field] = desired[field]

    # ---- reading ----------------------------------------------------------------------------------
    @property
    def status(self) -> Json:
        return self.job["status"]

    def pods(self) -> dict[str, Json]:
        return self.objects["Pod.v1"]

    def pod_names(self) -> list[str]:
        return sorted(self.pods())

    def services(self) -> dict[str, Json]:
        return self.objects["Service.v1"]

    def service_names(self) -> list[str]:
        return sorted(self.services())

    def pod(self, name: str) -> Json:
        return self.pods()[name]

    def condition(self, ctype: str) -> Json | None:
        return next((x for x in self.status.get("conditions", []) if x["type"] == ctype), None)

    def condition_types(self) -> list[tuple[str, str]]:
        return [(x["type"], x["status"]) for x in self.status.get("conditions", [])]

    def state(self) -> str | None:
        """The last True condition type: what `kubectl get` shows as STATE."""
        true = [x["type"] for x in self.status.get("conditions", []) if x["status"] == "True"]
        return true[-1] if true else None

    # ---- playing kubelet --------------------------------------------------------------------------
    def _pods(self, names: Iterable[str] | None) -> Iterator[Json]:
        for name in list(names) if names is not None else list(self.pods()):
            yield self.pods()[name]

    def _containers(self, pod: Json) -> list[str]:
        return [ctr["name"] for ctr in pod["spec"]["containers"]]

    def run(self, *names: str) -> None:
        """Pods (all if none named) start Running; restartCounts are kept."""
        for pod in self._pods(names or None):
            counts = self._restart_counts(pod)
            pod["status"] = {
                "phase": "Running",
                "podIP": "10.0.0.1",
                "containerStatuses": [
                    {"name": n, "ready": True, "restartCount": counts.get(n, 0), "state": {"running": {}}}
                    for n in self._containers(pod)
                ],
            }

    def pend(self, *names: str) -> None:
        for pod in self._pods(names or None):
            pod["status"] = {"phase": "Pending"}

    def _terminate(self, pod: Json, phase: str, exit_code: int, reason: str) -> None:
        counts = self._restart_counts(pod)
        pod["status"] = {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": n,
                    "ready": False,
                    "restartCount": counts.get(n, 0),
                    "state": {"terminated": {"exitCode": exit_code, "reason": reason}},
                }
                for n in self._containers(pod)
            ],
        }

    def succeed(self, *names: str) -> None:
        for pod in self._pods(names or None):
            self._terminate(pod, "Succeeded", 0, "Completed")

    def fail(self, *names: str, exit_code: int = 1) -> None:
        reason = "OOMKilled" if exit_code == 137 else "Error"
        for pod in self._pods(names or None):
            self._terminate(pod, "Failed", exit_code, reason)

    def restart_in_place(self, name: str, times: int = 1) -> None:
        """The kubelet restarted the containers of a Running pod (restartPolicy OnFailure/Always)."""
        pod = self.pod(name)
        for status in pod["status"]["containerStatuses"]:
            status["restartCount"] = status.get("restartCount", 0) + times
            status["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error"}}

    def _restart_counts(self, pod: Json) -> dict[str, int]:
        return {
            s["name"]: s.get("restartCount", 0)
            for s in (pod.get("status") or {}).get("containerStatuses", [])
        }

    def set_podgroup_phase(self, phase: str) -> None:
        for key in ("PodGroup.scheduling.volcano.sh/v1beta1", "PodGroup.scheduling.x-k8s.io/v1alpha1"):
            for group in self.objects[key].values():
                group["status"] = {"phase": phase}

    # ---- editing the job --------------------------------------------------------------------------
    def edit(self, **run_policy: Any) -> None:
        self.job["spec"].setdefault("runPolicy", {}).update(run_policy)
        self.job["metadata"]["generation"] += 1

    def scale(self, rtype: str, replicas: int) -> None:
        from trainop.frameworks import kind_info

        field = kind_info(self.job["kind"]).replica_field
        self.job["spec"][field][rtype]["replicas"] = replicas
        self.job["metadata"]["generation"] += 1

    def converge(self, limit: int = 6) -> SyncResult:
        """Sync until the response stops changing (the world then matches the desired state)."""
        previous = None
        for _ in range(limit):
            result = self.sync()
            text = canonical(result.response())
            if text == previous:
                return result
            previous = text
        raise AssertionError(f"no fixed point after {limit} syncs: {previous}")


# ---- small readers used by many tests ------------------------------------------------------------
def by_name(children: Iterable[Json], kind: str | None = None) -> dict[str, Json]:
    return {o["metadata"]["name"]: o for o in children if kind is None or o["kind"] == kind}


def names(children: Iterable[Json], kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in children if o["kind"] == kind)


def env_of(pod: Json, container: int | str = 0) -> dict[str, str]:
    ctrs = pod["spec"]["containers"]
    ctr = ctrs[container] if isinstance(container, int) else next(x for x in ctrs if x["name"] == container)
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in ctr.get("env") or []}


def env_list(pod: Json, container: int | str = 0) -> list[Json]:
    ctrs = pod["spec"]["containers"]
    ctr = ctrs[container] if isinstance(container, int) else next(x for x in ctrs if x["name"] == container)
    return list(ctr.get("env") or [])


def labels(obj: Json) -> dict[str, str]:
    return {
        k: v for k, v in obj["metadata"].get("labels", {}).items() if k.startswith("training.kubeflow.org/")
    }


def json_hygiene_problems(value: Any, path: str = "$") -> list[str]:
    """None, NaN/inf, and whole floats anywhere in a response make Metacontroller loop or fail."""
    problems: list[str] = []
    if value is None:
        problems.append(f"{path} is null")
    elif isinstance(value, bool):
        pass
    elif isinstance(value, float):
        if not math.isfinite(value):
            problems.append(f"{path} is {value}")
        elif value.is_integer():
            problems.append(f"{path} is the whole float {value!r}")
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                problems.append(f"{path} has a non-string key {k!r}")
            problems += json_hygiene_problems(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            problems += json_hygiene_problems(v, f"{path}[{i}]")
    return problems


def desired(job: Json, settings: Settings | None = None) -> list[Json]:
    """The children of a new job once what they wait for exists (an MPI launcher waits for its
    ServiceAccount, created by the first sync)."""
    return Cluster(job, settings).converge().children


def pods_by_name(job: Json, settings: Settings | None = None) -> dict[str, Json]:
    return by_name(desired(job, settings), "Pod")
