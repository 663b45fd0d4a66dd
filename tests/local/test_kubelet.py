"""A local pod behaves like kubelet runs it: init containers first and in order, the containers together,
restarts in place per the pod's restartPolicy, and a phase and container statuses the hook can read."""

from __future__ import annotations

import time
from pathlib import Path

from tests.local.helpers import behave, eventually, new_tag, pids_tagged
from trainop.jsontypes import Json
from trainop.local.containers import ContainerPlan
from trainop.local.kubelet import LocalPod, backoff, should_restart


def plan(name: str, argv: list[str], cwd: Path) -> ContainerPlan:
    return ContainerPlan(name, argv, cwd, {})


def local_pod(
    tmp_path: Path, policy: str, containers: list[ContainerPlan], init: list[ContainerPlan] | None = None
) -> LocalPod:
    desired = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "j-worker-0", "labels": {"training.kubeflow.org/replica-type": "worker"}},
        "spec": {"restartPolicy": policy, "containers": [{"name": c.name} for c in containers]},
    }
    return LocalPod(desired, init or [], containers, tmp_path / "logs", {})


def run_until(pod: LocalPod, phases: tuple[str, ...], timeout: float = 30.0) -> str:
    def done() -> bool:
        pod.step(time.monotonic())
        return pod.phase in phases

    assert eventually(done, timeout=timeout), f"pod stayed {pod.phase}"
    return pod.phase


def status(pod: LocalPod, index: int = 0) -> Json:
    return pod.observed()["status"]["containerStatuses"][index]


def test_under_never_a_non_zero_exit_fails_the_pod_and_keeps_the_code(tmp_path: Path) -> None:
    pod = local_pod(tmp_path, "Never", [plan("main", behave("--exit", "3"), tmp_path)])
    assert run_until(pod, ("Succeeded", "Failed")) == "Failed"
    assert status(pod)["state"]["terminated"]["exitCode"] == 3
    assert status(pod)["restartCount"] == 0


def test_under_never_exit_zero_succeeds(tmp_path: Path) -> None:
    pod = local_pod(tmp_path, "Never", [plan("main", behave(), tmp_path)])
    assert run_until(pod, ("Succeeded", "Failed")) == "Succeeded"


def test_under_on_failure_a_killed_container_is_restarted_in_place(tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    pod = local_pod(tmp_path, "OnFailure", [plan("main", behave("--kill-self-once", str(marker)), tmp_path)])
    assert run_until(pod, ("Succeeded", "Failed")) == "Succeeded"
    assert status(pod)["restartCount"] == 1
    assert status(pod)["lastState"]["terminated"]["exitCode"] == 137


def test_under_always_even_a_clean_exit_is_restarted(tmp_path: Path) -> None:
    pod = local_pod(tmp_path, "Always", [plan("main", behave(), tmp_path)])
    assert eventually(lambda: (pod.step(time.monotonic()), status(pod)["restartCount"] >= 1)[1], timeout=30)
    assert pod.phase == "Running"
    pod.delete(0.1, time.monotonic())
    assert eventually(lambda: (pod.step(time.monotonic()), pod.gone())[1])


def test_restarts_back_off_exponentially_with_a_cap() -> None:
    assert [backoff(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert [should_restart(p, 0) for p in ("Always", "OnFailure", "Never")] == [True, False, False]
    assert [should_restart(p, 1) for p in ("Always", "OnFailure", "Never")] == [True, True, False]


def test_init_containers_run_first_one_after_another(tmp_path: Path) -> None:
    trace = tmp_path / "trace"

    def step(name: str) -> ContainerPlan:
        return plan(name, ["sh", "-c", f"sleep 0.2; echo {name} >> {trace}"], tmp_path)

    pod = local_pod(tmp_path, "Never", [step("main")], init=[step("init-1"), step("init-2")])
    pod.step(time.monotonic())
    assert pod.phase == "Pending"
    assert run_until(pod, ("Succeeded", "Failed")) == "Succeeded"
    assert trace.read_text().split() == ["init-1", "init-2", "main"]
    assert [
        s["state"]["terminated"]["exitCode"] for s in pod.observed()["status"]["initContainerStatuses"]
    ] == [0, 0]


def test_a_failed_init_container_under_never_fails_the_pod_before_the_containers_start(
    tmp_path: Path,
) -> None:
    started = tmp_path / "started"
    pod = local_pod(
        tmp_path,
        "Never",
        [plan("main", behave("--touch", str(started)), tmp_path)],
        init=[plan("init", behave("--exit", "1"), tmp_path)],
    )
    assert run_until(pod, ("Succeeded", "Failed")) == "Failed"
    assert not started.exists()
    assert status(pod)["state"] == {"waiting": {"reason": "PodInitializing"}}


def test_the_containers_of_a_pod_run_at_the_same_time(tmp_path: Path) -> None:
    # Each waits for the other's file: only concurrent containers can both finish.
    a, b = tmp_path / "a", tmp_path / "b"
    pod = local_pod(
        tmp_path,
        "Never",
        [
            plan("first", behave("--touch", str(a), "--wait-for", str(b)), tmp_path),
            plan("second", behave("--touch", str(b), "--wait-for", str(a)), tmp_path),
        ],
    )
    assert run_until(pod, ("Succeeded", "Failed")) == "Succeeded"


def test_the_observed_pod_is_the_desired_one_with_status(tmp_path: Path) -> None:
    pod = local_pod(tmp_path, "Never", [plan("main", behave("--sleep", "30"), tmp_path)])
    run_until(pod, ("Running",))
    observed = pod.observed()
    assert observed["metadata"]["name"] == "j-worker-0"
    assert observed["metadata"]["labels"] == {"training.kubeflow.org/replica-type": "worker"}
    assert observed["metadata"]["uid"] == pod.uid
    assert observed["spec"] == pod.desired["spec"]
    assert observed["status"]["phase"] == "Running"
    assert observed["status"]["podIP"] == "127.0.0.1"
    assert status(pod)["name"] == "main" and "running" in status(pod)["state"]
    pod.delete(5, time.monotonic())
    assert "deletionTimestamp" in pod.observed()["metadata"]
    assert eventually(lambda: (pod.step(time.monotonic()), pod.gone())[1])
    assert status(pod)["state"]["terminated"]["exitCode"] == 143


def test_deleting_a_pod_stops_everything_it_started(tmp_path: Path) -> None:
    tag = new_tag()
    pod = local_pod(
        tmp_path, "Always", [plan("main", behave("--spawn", "--sleep", "60", "--tag", tag), tmp_path)]
    )
    run_until(pod, ("Running",))
    assert eventually(lambda: len(pids_tagged(tag)) == 2)
    pod.delete(5, time.monotonic())
    assert eventually(lambda: (pod.step(time.monotonic()), pod.gone())[1])
    assert pids_tagged(tag) == []
