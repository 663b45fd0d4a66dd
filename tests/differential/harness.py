"""Both stacks, every case on both, and the comparison (see tests/differential/README.md)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import deliberate
import noise
from cases import Case, all_cases
from controlplane import NODE_NAME, ControlPlane, ControlPlaneError, default_bin_dir, default_cache_dir
from diff import ABSENT, Difference, diff
from kube import Api, QueueWatch
from kubeflow_stack import KubeflowStack, ensure_kubeflow_binary, kubeflow_dir
from runner import Run, Runner
from trainop_stack import TrainopStack, ensure_binaries

SIDES = ("kubeflow", "trainop")
# Every case runs at once on one node: room for all their pods and GPUs, so none waits on another.
NODE_CAPACITY = {"cpu": "1000", "memory": "4Ti", "ephemeral-storage": "100Ti", "pods": "1000",
                 "nvidia.com/gpu": "1000"}  # fmt: skip


def widen_node(cp: ControlPlane) -> None:
    patch = {"status": {"capacity": NODE_CAPACITY, "allocatable": NODE_CAPACITY}}
    cp.kubectl("patch", "node", NODE_NAME, "--subresource=status", "--type=merge", "-p", json.dumps(patch))


@dataclass
class Compared:
    case: Case
    kubeflow: Run
    trainop: Run
    differences: list[Difference] = field(default_factory=list)


@dataclass
class Differential:
    """The outcome of one differential run."""

    compared: list[Compared]
    entries: list[deliberate.Entry]
    seconds: float
    log_tails: str = ""
    saved_to: Path | None = None

    @property
    def differences(self) -> list[Difference]:
        return [d for c in self.compared for d in c.differences]

    def explained(self) -> list[tuple[Difference, str | None]]:
        """Each difference with the deliberate entry that lists it, ``noise:<rule>`` when it is Kubeflow's
        own run-to-run randomness (noise.py), or None."""
        out: list[tuple[Difference, str | None]] = []
        for c in self.compared:
            for d in c.differences:
                fields = (d.case, d.checkpoint, d.path, d.kubeflow, d.trainop)
                rule = noise.explain(d, c.kubeflow.checkpoints.get(d.checkpoint) or {})
                out.append(
                    (d, deliberate.explain(self.entries, *fields) or (f"noise:{rule}" if rule else None))
                )
        return out

    def unlisted(self) -> list[Difference]:
        return [d for d, entry in self.explained() if entry is None]

    def stale_entries(self) -> list[str]:
        used = {entry for _, entry in self.explained() if entry}
        return [e.id for e in self.entries if e.match and e.id not in used]

    def harness_errors(self) -> list[str]:
        return [
            f"{c.case.id} [{run.side}]: {run.error}"
            for c in self.compared
            for run in (c.kubeflow, c.trainop)
            if run.error
        ]

    def counts(self) -> dict[str, int]:
        """Jobs; checkpoints compared; children compared (a child at a checkpoint, on either side, counts
        once); Events compared (likewise); differences, and those on no list."""
        checkpoints = children = events = 0
        for c in self.compared:
            for label in set(c.kubeflow.checkpoints) | set(c.trainop.checkpoints):
                sides = [run.checkpoints.get(label) or {} for run in (c.kubeflow, c.trainop)]
                checkpoints += 1
                children += len(set().union(*(side.get("children") or {} for side in sides)))
                events += len(set().union(*(side.get("events") or [] for side in sides)))
        return {"jobs": len(self.compared), "checkpoints": checkpoints, "child snapshots": children,
                "events": events, "differences": len(self.differences),
                "unlisted": len(self.unlisted())}  # fmt: skip

    def summary(self) -> str:
        counts = ", ".join(f"{v} {k}" for k, v in self.counts().items())
        by_entry = Counter(entry or "UNLISTED" for _, entry in self.explained())
        listed = ", ".join(f"{k} x{v}" for k, v in sorted(by_entry.items()))
        return f"differential vs Kubeflow v1.9.4 ({self.seconds:.0f}s): {counts}" + (
            f"\n  by deliberate entry: {listed}" if listed else ""
        )

    def write(self, path: Path) -> None:
        """Every checkpoint of both sides and every difference with its verdict, for a closer look."""
        data = {
            "summary": self.summary(),
            "differences": [{**dataclasses.asdict(d), "listed_as": why} for d, why in self.explained()],
            "runs": {
                c.case.id: {run.side: {"error": run.error, "checkpoints": run.checkpoints}
                            for run in (c.kubeflow, c.trainop)}
                for c in self.compared
            },
        }  # fmt: skip
        path.write_text(json.dumps(data, indent=1, sort_keys=True))
        self.saved_to = path

    def report(self, only_unlisted: bool = True) -> str:
        diffs = self.unlisted() if only_unlisted else self.differences
        return "\n".join(d.render() for d in diffs)


def compare(case: Case, kubeflow: Run, trainop: Run) -> list[Difference]:
    out: list[Difference] = []
    labels = list(dict.fromkeys([*kubeflow.checkpoints, *trainop.checkpoints]))
    for label in labels:
        left, right = kubeflow.checkpoints.get(label), trainop.checkpoints.get(label)
        if left is None or right is None:
            out.append(Difference(case.id, label, "checkpoint", "reached" if left else ABSENT,
                                  "reached" if right else ABSENT))  # fmt: skip
            continue
        out += diff(case.id, label, left, right)
    return out


class Stack(Protocol):
    cp: ControlPlane

    def stop(self) -> None: ...

    def log_tails(self, limit: int = 3000) -> str: ...


def metrics_url(stack: Stack) -> str:
    """Where the side's operator publishes its workqueue metrics."""
    if isinstance(stack, KubeflowStack):
        return stack.metrics_url
    return f"http://127.0.0.1:{stack.cp.metacontroller_metrics_port}/metrics"


class Stacks:
    """The two sides; ``trainop`` is Kubeflow again in the self-check (selfcheck.py)."""

    def __init__(self, kubeflow: Stack, trainop: Stack) -> None:
        self.kubeflow = kubeflow
        self.trainop = trainop
        self.apis = {
            "kubeflow": Api(kubeflow.cp.server, kubeflow.cp.client_ssl_context()),
            "trainop": Api(trainop.cp.server, trainop.cp.client_ssl_context()),
        }
        self.queues = {
            "kubeflow": QueueWatch(metrics_url(kubeflow)),
            "trainop": QueueWatch(metrics_url(trainop)),
        }
        for side, queue in self.queues.items():
            # A metrics page without queues would make every settle a no-op; fail instead.
            if "workqueue_depth{" not in queue.scrape():
                raise ControlPlaneError(f"{side}: no workqueue_depth metric at {queue.url}")

    def run_all(self, cases: list[Case] | None = None) -> Differential:
        cases = cases if cases is not None else all_cases(kubeflow_dir() / "examples")
        t0 = time.monotonic()
        locks = {side: threading.Lock() for side in SIDES}
        with ThreadPoolExecutor(max_workers=2 * len(cases)) as pool:
            futures = {
                (case.id, side): pool.submit(
                    Runner(self.apis[side], side, case, self.queues[side].idle, locks[side]).execute
                )
                for case in cases
                for side in SIDES
            }
            runs = {key: f.result() for key, f in futures.items()}
        compared = [
            Compared(case, runs[case.id, "kubeflow"], runs[case.id, "trainop"],
                     compare(case, runs[case.id, "kubeflow"], runs[case.id, "trainop"]))
            for case in cases
        ]  # fmt: skip
        return Differential(compared, deliberate.load(), time.monotonic() - t0, self.log_tails())

    def log_tails(self) -> str:
        return f"=== Kubeflow\n{self.kubeflow.log_tails()}\n=== trainop\n{self.trainop.log_tails()}"

    def stop(self) -> None:
        try:
            self.trainop.stop()
        finally:
            self.kubeflow.stop()


def start_stacks(work: Path, *, self_check: bool = False) -> Stacks:
    """Build or reuse the binaries, then start both stacks at once; raises ControlPlaneError.

    ``self_check`` puts Kubeflow on both sides: any difference then is the harness's own noise.
    """
    bin_dir = default_bin_dir()
    ensure_binaries(bin_dir, work / "build-control-plane.log")
    binary = ensure_kubeflow_binary(bin_dir, work / "build-kubeflow.log")
    crds = kubeflow_dir(default_cache_dir()) / "crds"
    kubeflow = KubeflowStack(work / "kubeflow", bin_dir, binary, crds)
    trainop: KubeflowStack | TrainopStack = (
        KubeflowStack(work / "kubeflow-again", bin_dir, binary, crds)
        if self_check
        else TrainopStack(work / "trainop", bin_dir)
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        started = [pool.submit(kubeflow.start), pool.submit(trainop.start)]
        errors = [f.exception() for f in started]
    failed = [e for e in errors if e is not None]
    if failed:
        kubeflow.stop()
        trainop.stop()
        raise ControlPlaneError("; ".join(str(e) for e in failed))
    for cp in (kubeflow.cp, trainop.cp):
        widen_node(cp)
    return Stacks(kubeflow, trainop)
