"""Runs one Case on one cluster and records its normalised snapshots, label by label.

Both operators get the same script: create a namespace, create the job as written (an admission denial
is recorded as the ``admission`` checkpoint and ends the script), then each Step. A checkpoint is taken
once its wait holds and the normalised state has not changed for ``SETTLE_POLLS`` polls in a row, so
an operator that acts in two syncs (status, then cleanup) is compared after both. A wait that times out
is recorded in the checkpoint (``wait``), and the script ends there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import normalize
from cases import Case, FinishPods, PatchJob, Sleep, Snapshot, outcome_annotations, pod_name
from kube import Api, ApiError
from trainop_stack import KINDS

SETTLE_POLLS = 4
POLL_INTERVAL = 1.0
SETTLE_TIMEOUT = 30.0
FINAL_SETTLE_POLLS = 8
FINAL_SETTLE_TIMEOUT = 60.0
EVENT_KEYS = ("events", "eventSources", "otherEvents", "_eventEmissions")
CHILD_PATHS = {
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "Service": "/api/v1/namespaces/{ns}/services",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "HorizontalPodAutoscaler": "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
    "Event": "/api/v1/namespaces/{ns}/events",
}
TERMINAL = ("Succeeded", "Failed")


@dataclass
class Run:
    """One side's record of a case: checkpoint label -> normalised snapshot, in order."""

    case: Case
    side: str
    checkpoints: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None


def job_path(case: Case) -> str:
    return f"/apis/kubeflow.org/v1/namespaces/{case.namespace}/{KINDS[case.kind]['plural']}"


def fetch(api: Api, case: Case, kinds: tuple[str, ...] = tuple(CHILD_PATHS)) -> dict[str, Any]:
    """Raw lists of the case's namespace (only ``kinds``) and its job (None once deleted)."""
    raw: dict[str, Any] = {kind: api.items(CHILD_PATHS[kind].format(ns=case.namespace)) for kind in kinds}
    raw["job"] = api.get(f"{job_path(case)}/{case.name}")
    return raw


def _pods(raw: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in raw["Pod"] if not p["metadata"].get("deletionTimestamp")]


def _phase(p: dict[str, Any]) -> str:
    return str((p.get("status") or {}).get("phase"))


def _conditions(raw: dict[str, Any]) -> dict[str, str]:
    job = raw.get("job") or {}
    return {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}


def conditions_for(case: Case) -> dict[str, Callable[[dict[str, Any]], bool]]:
    """The waits a Snapshot step can name; all but the job-* ones look at pods only."""
    return {
        "settled": lambda raw: True,
        "pods-running": lambda raw: (
            sum(_phase(p) == "Running" for p in _pods(raw)) == case.expected_pods() == len(_pods(raw))
        ),
        "no-pods": lambda raw: not raw["Pod"],
        "job-gone": lambda raw: raw["job"] is None and not raw["Pod"],
        "job-failed": lambda raw: _conditions(raw).get("Failed") == "True",
        "job-has-conditions": lambda raw: bool(_conditions(raw)),
    }


class Runner:
    def __init__(
        self, api: Api, side: str, case: Case, idle: Callable[[], bool], create_lock: threading.Lock
    ) -> None:
        self.api = api
        self.idle = idle
        # Jobs are created one at a time per side, as `kubectl apply -f DIR` does; the cases then run
        # at once.
        self.create_lock = create_lock
        self.run = Run(case, side)
        self.case = case

    def snap(self) -> tuple[dict[str, Any], dict[str, Any]]:
        raw = fetch(self.api, self.case)
        return raw, normalize.snapshot(raw, self.case.kind, self.case.name)

    def wait(self, what: str, check: Callable[[dict[str, Any]], bool], timeout: float) -> str | None:
        """None once ``check`` holds, else why it did not."""
        deadline = time.monotonic() + timeout
        while True:
            # Waits look at pods and the job only: polling every list of every case would load both
            # apiservers for nothing.
            raw = fetch(self.api, self.case, ("Pod",))
            if check(raw):
                return None
            if time.monotonic() > deadline:
                return f"timed out after {timeout:.0f}s waiting for {what}"
            time.sleep(POLL_INTERVAL)

    def settle(self, *, final: bool = False) -> dict[str, Any]:
        """The normalised state once the operator drained its queue and the state stopped changing.

        Stability alone is not enough: an operator with a backlog leaves the state unchanged for
        seconds before it gets to this job. Events are compared at the ``final`` checkpoint only, with
        a longer quiet period: both operators write them asynchronously, one at a time, and a burst of
        job creations delays them by seconds, so which of them exist mid-run is a matter of timing.
        Cumulative, they are what the job's ``kubectl describe`` shows at its end. After the timeout
        the state is taken as it is.
        """
        polls, timeout = (
            (FINAL_SETTLE_POLLS, FINAL_SETTLE_TIMEOUT) if final else (SETTLE_POLLS, SETTLE_TIMEOUT)
        )
        deadline = time.monotonic() + timeout
        while not self.idle() and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL / 4)

        def state() -> dict[str, Any]:
            _, snap = self.snap()
            return snap if final else {k: v for k, v in snap.items() if k not in EVENT_KEYS}

        last = state()
        same = 1
        while same < polls and time.monotonic() < deadline:
            time.sleep(POLL_INTERVAL)
            now = state()
            same = same + 1 if now == last else 1
            last = now
        return last

    def checkpoint(self, step: Snapshot) -> bool:
        why = self.wait(step.until, conditions_for(self.case)[step.until], step.timeout)
        last = [s for s in self.case.steps if isinstance(s, Snapshot)][-1]
        snap = self.settle(final=why is not None or step is last)
        if why:
            snap["wait"] = why
        self.run.checkpoints[step.label] = snap
        return why is None

    def finish_pods(self, step: FinishPods) -> bool:
        pods = "/api/v1/namespaces/" + self.case.namespace + "/pods/"
        for rtype, index in self.case.finish_order(step.pods):
            raw = fetch(self.api, self.case, ("Pod",))
            if any(_conditions(raw).get(t) == "True" for t in TERMINAL):
                return True
            name = pod_name(self.case.name, rtype, index)
            found = [p for p in _pods(raw) if p["metadata"]["name"] == name and _phase(p) == "Running"]
            if not found:
                continue
            uid = found[0]["metadata"]["uid"]
            try:
                self.api.merge_patch(pods + name, {"metadata": {"annotations": outcome_annotations(step)}})
            except ApiError as e:
                if e.status == 404:
                    continue
                raise

            def done(raw: dict[str, Any], name: str = name, uid: str = uid) -> bool:
                same = [
                    p for p in raw["Pod"] if p["metadata"]["name"] == name and p["metadata"]["uid"] == uid
                ]
                return (
                    not same
                    or _phase(same[0]) == step.outcome
                    or bool(same[0]["metadata"].get("deletionTimestamp"))
                )

            why = self.wait(f"pod {name} {step.outcome}", done, 60)
            if why:
                self.run.error = why
                return False
            self.settle()
        return True

    def execute(self) -> Run:
        case = self.case
        try:
            self.api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": case.namespace}})  # fmt: skip
            sa = f"/api/v1/namespaces/{case.namespace}/serviceaccounts/default"
            if self.wait("default ServiceAccount", lambda raw: self.api.get(sa) is not None, 60):
                self.run.error = "namespace has no default ServiceAccount"
                return self.run
            try:
                with self.create_lock:
                    self.api.create(job_path(case), case.job)
            except ApiError as e:
                self.run.checkpoints["admission"] = {"admitted": False, "message": e.message}
                return self.run
            self.run.checkpoints["admission"] = {"admitted": True}
            for step in case.steps:
                if isinstance(step, Snapshot):
                    ok = self.checkpoint(step)
                elif isinstance(step, FinishPods):
                    ok = self.finish_pods(step)
                elif isinstance(step, PatchJob):
                    self.api.merge_patch(f"{job_path(case)}/{case.name}", step.patch)
                    ok = True
                elif isinstance(step, Sleep):
                    time.sleep(step.seconds)
                    ok = True
                if not ok:
                    break
        except Exception as e:  # one broken case must not hide the others' results
            self.run.error = f"{type(e).__name__}: {e}"
        return self.run
