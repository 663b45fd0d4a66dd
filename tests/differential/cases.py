"""The jobs the differential test applies to both operators, and the pod stages it drives them through.

A ``Case`` is a job plus a script of ``Step``s. Waits are on what kwok does to pods (the same on both
clusters), never on the operator's own status, so both sides reach every checkpoint and a status the
operator gets wrong shows up in the snapshot instead of as a timeout. Pods are finished one at a time
(deciding replica last, index 0 last within a type), each followed by a settle, so no run races an
operator's cleanup against kwok's next transition.

Cases:
* every ``kubeflow.org/v1`` document of Kubeflow's examples/ (no other CRD needed), with images
  replaced by the e2e image, PersistentVolumeClaim volumes by emptyDir (nothing provisions them on
  kwok) and the namespace dropped (one namespace per case): running, then succeeded;
* edge cases for every run policy (cleanPodPolicy All/Running/None, ttlSecondsAfterFinished,
  activeDeadlineSeconds, backoffLimit, suspend/resume) and restart policy (Never, OnFailure, Always,
  ExitCode with a retryable and a permanent code).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from trainop_stack import IMAGE, KINDS, job, kwok_annotations, replica

API_VERSION = "kubeflow.org/v1"
RUN_FOREVER: dict[str, str] = {}


# ---------------------------------------------------------------------------------------------- steps
@dataclass(frozen=True)
class Snapshot:
    """Wait for ``until`` (a name in runner.CONDITIONS), let the state settle, record it as ``label``."""

    label: str
    until: str = "settled"
    timeout: float = 120.0


@dataclass(frozen=True)
class FinishPods:
    """Give pods an outcome one by one (deciding replica types last), settling after each.

    ``pods`` names replica types ("Worker") or pods ("Worker-1"); empty means every pod of the job.
    Pods that are gone or already finished are skipped; once the job has a terminal condition no
    further pod is touched.
    """

    outcome: str = "Succeeded"
    exit_code: int | None = None
    pods: tuple[str, ...] = ()


@dataclass(frozen=True)
class PatchJob:
    patch: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step = Snapshot | FinishPods | PatchJob | Sleep


@dataclass(frozen=True)
class Case:
    id: str
    job: dict[str, Any]
    steps: tuple[Step, ...]
    source: str = "edge case"

    @property
    def kind(self) -> str:
        return str(self.job["kind"])

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return "d-" + self.id[:60]

    @property
    def replica_specs(self) -> dict[str, dict[str, Any]]:
        specs: dict[str, dict[str, Any]] = self.job["spec"][KINDS[self.kind]["field"]]
        return specs

    def expected_pods(self) -> int:
        return sum(int(r.get("replicas", 1)) for r in self.replica_specs.values())

    def finish_order(self, only: tuple[str, ...] = ()) -> list[tuple[str, int]]:
        """(replica type, index) in the order pods are finished: deciding types last, index 0 last."""
        deciders = deciding_types(self.kind, set(self.replica_specs))
        types = sorted(self.replica_specs, key=lambda t: (t in deciders, t))
        order = [
            (t, i) for t in types for i in reversed(range(int(self.replica_specs[t].get("replicas", 1))))
        ]
        if not only:
            return order
        return [(t, i) for t, i in order if t in only or f"{t}-{i}" in only]


def deciding_types(kind: str, types: set[str]) -> set[str]:
    """The replica types whose outcome decides the job's, per Kubeflow's controllers."""
    if kind == "MPIJob":
        return {"Launcher"}
    for t in ("Chief", "Master"):
        if t in types:
            return {t}
    return {"Worker"} & types or types


def pod_name(job_name: str, rtype: str, index: int) -> str:
    return f"{job_name}-{rtype.lower()}-{index}"


# ---------------------------------------------------------------------------------------------- examples
RUN_AND_SUCCEED: tuple[Step, ...] = (
    Snapshot("running", until="pods-running"),
    FinishPods("Succeeded"),
    Snapshot("finished"),
)


def rewrite_for_kwok(obj: dict[str, Any]) -> dict[str, Any]:
    """Kubeflow's example as the differential test applies it: e2e image, no PVCs, no namespace."""
    out = copy.deepcopy(obj)
    out["metadata"].pop("namespace", None)
    for rspec in out["spec"][KINDS[out["kind"]]["field"]].values():
        pod = rspec.setdefault("template", {}).setdefault("spec", {})
        for key in ("containers", "initContainers"):
            for c in pod.get(key) or []:
                c["image"] = IMAGE
        for vol in pod.get("volumes") or []:
            if "persistentVolumeClaim" in vol:
                del vol["persistentVolumeClaim"]
                vol["emptyDir"] = {}
    return out


def example_cases(examples: Path) -> Iterator[Case]:
    for path in sorted(examples.rglob("*.y*ml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        jobs = [d for d in docs if d.get("apiVersion") == API_VERSION and d.get("kind") in KINDS]
        for n, doc in enumerate(jobs):
            rel = path.relative_to(examples).with_suffix("")
            cid = "ex-" + re.sub(r"[^a-z0-9]+", "-", str(rel).lower()).strip("-")
            if len(jobs) > 1:
                cid += f"-{n}"
            yield Case(
                cid, rewrite_for_kwok(doc), RUN_AND_SUCCEED, source=f"examples/{path.relative_to(examples)}"
            )


# ---------------------------------------------------------------------------------------------- edge cases
def pytorch(name: str, run_policy: dict[str, Any] | None = None, restart: str = "OnFailure",
            workers: int = 1, **spec: Any) -> dict[str, Any]:  # fmt: skip
    return job(
        "PyTorchJob", name,
        {"Master": replica("PyTorchJob", 1, restart, RUN_FOREVER),
         "Worker": replica("PyTorchJob", workers, restart, RUN_FOREVER)},
        run_policy, **spec,
    )  # fmt: skip


def tfjob(name: str, run_policy: dict[str, Any] | None = None, restart: str = "Never") -> dict[str, Any]:
    return job(
        "TFJob", name,
        {"PS": replica("TFJob", 1, restart, RUN_FOREVER),
         "Worker": replica("TFJob", 2, restart, RUN_FOREVER)},
        run_policy,
    )  # fmt: skip


SUSPEND = PatchJob({"spec": {"runPolicy": {"suspend": True}}})
RESUME = PatchJob({"spec": {"runPolicy": {"suspend": False}}})


TOUCH = PatchJob({"metadata": {"annotations": {"e2e/touched": "true"}}})


def fail(pods: str, code: int = 1) -> FinishPods:
    return FinishPods("Failed", code, (pods,))


def edge_cases() -> Iterator[Case]:
    running = Snapshot("running", until="pods-running")
    finished = Snapshot("finished")
    # cleanPodPolicy: the Master decides while a Worker still runs, so each policy has something to do.
    for policy in ("All", "Running", "None"):
        yield Case(
            f"clean-pod-policy-{policy.lower()}",
            pytorch("clean", {"cleanPodPolicy": policy}, workers=2),
            (running, FinishPods("Succeeded", pods=("Master",)), finished),
        )
    yield Case(
        "ttl-seconds-after-finished",
        pytorch("ttl", {"ttlSecondsAfterFinished": 3}),
        (running, FinishPods("Succeeded"), Snapshot("deleted", until="job-gone", timeout=90)),
    )
    # Kubeflow checks the deadline only when something makes it reconcile (Kubeflow #3358): the job is
    # touched once the deadline has passed, so both sides are compared on what they do, not on when. The
    # deadline leaves room for every case's pods to start first on a loaded machine.
    yield Case(
        "active-deadline-seconds",
        pytorch("deadline", {"activeDeadlineSeconds": 45}),
        (running, Sleep(45), TOUCH, Snapshot("deadline", until="job-failed", timeout=60)),
    )
    yield Case(
        "backoff-limit-on-failure",
        pytorch("backoff", {"backoffLimit": 1}),
        (running, fail("Worker"), Snapshot("worker-failed")),
    )
    yield Case(
        "backoff-limit-exit-code",
        pytorch("backoff", {"backoffLimit": 1}, restart="ExitCode"),
        (running, fail("Worker", 137), Snapshot("retry-1", until="pods-running"),
         fail("Worker", 137), Snapshot("retry-2")),
    )  # fmt: skip
    yield Case(
        "suspend-at-create-then-resume",
        pytorch("suspended", {"suspend": True}),
        (Snapshot("suspended", until="job-has-conditions"), RESUME, Snapshot("resumed", until="pods-running"),
         FinishPods("Succeeded"), finished),
    )  # fmt: skip
    yield Case(
        "suspend-while-running-then-resume",
        pytorch("suspend", {}),
        (running, SUSPEND, Snapshot("suspended", until="no-pods"), RESUME,
         Snapshot("resumed", until="pods-running"), FinishPods("Succeeded"), finished),
    )  # fmt: skip
    for restart in ("Never", "OnFailure", "Always"):
        yield Case(
            f"restart-{restart.lower()}-pytorch-worker-fails",
            pytorch("restart", restart=restart),
            (running, fail("Worker"), Snapshot("worker-failed")),
        )
        yield Case(
            f"restart-{restart.lower()}-tfjob-worker-fails",
            tfjob("restart", restart=restart),
            (running, fail("Worker-1"), Snapshot("worker-failed")),
        )
    yield Case(
        "restart-exit-code-retryable",
        pytorch("exitcode", restart="ExitCode"),
        (running, fail("Worker", 137), Snapshot("restarted", until="pods-running"), FinishPods("Succeeded"),
         finished),
    )  # fmt: skip
    yield Case(
        "restart-exit-code-permanent",
        pytorch("exitcode", restart="ExitCode"),
        (running, fail("Worker", 1), Snapshot("worker-failed")),
    )
    yield Case(
        "mpi-launcher-fails",
        job("MPIJob", "mpi", {"Launcher": replica("MPIJob", 1, "Never", RUN_FOREVER),
                              "Worker": replica("MPIJob", 2, "Never", RUN_FOREVER)}),
        (running, fail("Launcher"), Snapshot("launcher-failed")),
    )  # fmt: skip


def all_cases(examples: Path) -> list[Case]:
    cases = [*example_cases(examples), *edge_cases()]
    ids = [c.id for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"duplicate differential case ids: {dupes}")
    return cases


def outcome_annotations(step: FinishPods) -> dict[str, str]:
    return kwok_annotations(step.outcome, run_for="0s", exit_code=step.exit_code)
