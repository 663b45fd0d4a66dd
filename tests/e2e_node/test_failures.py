"""Failure semantics with real processes: exit codes come from real containers, an OOM kill from the
kernel's memory cgroup, and "stopped" means no container of the job runs on the node any more (asked of
containerd itself, not of the API).

Jobs here are small TFJobs and PyTorchJobs whose containers run busybox scripts from the tier's toolbox
image; TFJob succeeds when worker 0 does, PyTorchJob when the master does (Kubeflow's success policies).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainop_stack import Namespace, job

from tests.e2e_node.realnode import RealNodeStack

CONTAINER = {"TFJob": "tensorflow", "PyTorchJob": "pytorch"}


def replica(
    stack: RealNodeStack,
    kind: str,
    script: str,
    *,
    replicas: int = 1,
    restart_policy: str = "Never",
    memory: str | None = None,
    host_dir: Path | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": CONTAINER[kind],
        "image": stack.node.toolbox_image,
        "command": ["sh", "-c", script],
    }
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 1, "containers": [container]}
    if memory:
        container["resources"] = {"limits": {"memory": memory}, "requests": {"memory": memory}}
    if host_dir:
        container["volumeMounts"] = [{"name": "state", "mountPath": "/state"}]
        spec["volumes"] = [{"name": "state", "hostPath": {"path": str(host_dir), "type": "Directory"}}]
    return {"replicas": replicas, "restartPolicy": restart_policy, "template": {"spec": spec}}


def terminated(ns: Namespace, pod: str) -> dict[str, Any] | None:
    statuses = ns.get(f"pod/{pod}").get("status", {}).get("containerStatuses") or []
    state = statuses[0].get("state", {}) if statuses else {}
    return state.get("terminated")


def test_oom_killed_worker_is_recreated_under_exit_code_and_the_job_succeeds(
    node_stack: RealNodeStack, ns: Namespace, tmp_path: Path
) -> None:
    # The first incarnation leaves a mark on the node, then grows a shell variable past its 32 MiB limit;
    # the recreated pod (a new pod of the same name) finds the mark and exits 0.
    host_dir = tmp_path / "state"
    host_dir.mkdir()
    script = (
        "if [ -e /state/oom-once ]; then echo second life; exit 0; fi; touch /state/oom-once; "
        "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived; exit 3"
    )
    spec = replica(node_stack, "TFJob", script, restart_policy="ExitCode", memory="32Mi", host_dir=host_dir)
    ns.create(job("TFJob", "oom", {"Worker": spec}))
    first_uid = ns.wait_children("pods", "oom", {"oom-worker-0"}, timeout=60)["oom-worker-0"]["metadata"][
        "uid"
    ]
    seen: dict[str, Any] = {}

    def killed_by_the_kernel() -> bool:
        pod = ns.get("pod/oom-worker-0")
        if pod["metadata"]["uid"] != first_uid:
            return False
        seen.update(terminated(ns, "oom-worker-0") or {})
        return bool(seen)

    ns.wait_until("the first worker to be OOM-killed", killed_by_the_kernel, timeout=120)
    assert (seen.get("exitCode"), seen.get("reason")) == (137, "OOMKilled")
    ns.wait_for("tfjob/oom", "Succeeded", timeout=120)
    pod = ns.get("pod/oom-worker-0")
    assert pod["metadata"]["uid"] != first_uid
    assert ns.kubectl("logs", "oom-worker-0").stdout.strip() == "second life"


def test_permanent_exit_code_fails_the_job(node_stack: RealNodeStack, ns: Namespace) -> None:
    spec = replica(node_stack, "TFJob", "echo giving up; exit 1", restart_policy="ExitCode")
    ns.create(job("TFJob", "permanent", {"Worker": spec}))
    ns.wait_for("tfjob/permanent", "Failed", timeout=120)
    state = terminated(ns, "permanent-worker-0")
    assert state is not None and state["exitCode"] == 1
    assert ns.kubectl("logs", "permanent-worker-0").stdout.strip() == "giving up"


def test_active_deadline_stops_running_containers(node_stack: RealNodeStack, ns: Namespace) -> None:
    # Kubeflow 1.9.4 marks the job Failed before it cleans up, so the deadline stops the pods through
    # cleanPodPolicy (kubeflow/trainer#3419): with the default None they would keep running, as there.
    spec = replica(node_stack, "TFJob", "sleep 600", replicas=2)
    policy = {"activeDeadlineSeconds": 15, "cleanPodPolicy": "Running"}
    ns.create(job("TFJob", "deadline", {"Worker": spec}, run_policy=policy))
    ns.wait_until(
        "both workers' containers running",
        lambda: len(node_stack.node.running_containers(ns.name)) == 2,
        timeout=120,
    )
    ns.wait_for("tfjob/deadline", "Failed", timeout=90)
    # Kubeflow's own reason and message for a passed deadline.
    failed = ns.condition("tfjob/deadline", "Failed") or {}
    assert failed.get("reason") == "TFJobFailed", failed
    assert "active longer than specified deadline" in failed.get("message", ""), failed
    ns.wait_until(
        "no container of the job running", lambda: not node_stack.node.running_containers(ns.name), 60
    )


def test_clean_pod_policy_running_removes_still_running_pods_at_success(
    node_stack: RealNodeStack, ns: Namespace, tmp_path: Path
) -> None:
    # The workers wait for the master's name in cluster DNS first (the operator's init container, from
    # the toolbox image the hooks are configured with), then sleep. The master finishes once the test,
    # having seen both workers' containers run, leaves it a mark on the node.
    host_dir = tmp_path / "state"
    host_dir.mkdir()
    finish = "until [ -e /state/finish ]; do sleep 0.5; done; echo master done"
    master = replica(node_stack, "PyTorchJob", finish, restart_policy="OnFailure", host_dir=host_dir)
    workers = replica(node_stack, "PyTorchJob", "sleep 600", replicas=2, restart_policy="OnFailure")
    ns.create(
        job(
            "PyTorchJob",
            "clean",
            {"Master": master, "Worker": workers},
            run_policy={"cleanPodPolicy": "Running"},
        )
    )
    everyone = {"clean-master-0/pytorch", "clean-worker-0/pytorch", "clean-worker-1/pytorch"}
    ns.wait_until(
        "all containers running", lambda: set(node_stack.node.running_containers(ns.name)) == everyone, 120
    )
    (host_dir / "finish").touch()
    ns.wait_for("pytorchjob/clean", "Succeeded", timeout=120)
    ns.wait_children("pods", "clean", {"clean-master-0"}, timeout=60)
    ns.wait_until("no worker container running", lambda: not node_stack.node.running_containers(ns.name), 60)
    assert ns.get("pod/clean-master-0")["status"]["phase"] == "Succeeded"
    assert ns.kubectl("logs", "clean-master-0").stdout.strip() == "master done"


def test_suspend_stops_the_containers_and_resume_starts_them_again(
    node_stack: RealNodeStack, ns: Namespace
) -> None:
    ns.create(job("TFJob", "pausable", {"Worker": replica(node_stack, "TFJob", "sleep 600", replicas=2)}))
    running = {"pausable-worker-0/tensorflow", "pausable-worker-1/tensorflow"}
    ns.wait_until("workers running", lambda: set(node_stack.node.running_containers(ns.name)) == running, 120)
    ns.kubectl(
        "patch",
        "tfjob/pausable",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"runPolicy": {"suspend": True}}}),
    )
    ns.wait_for("tfjob/pausable", "Suspended", timeout=60)
    ns.wait_until("no container running", lambda: not node_stack.node.running_containers(ns.name), 60)
    ns.kubectl(
        "patch",
        "tfjob/pausable",
        "--type=merge",
        "-p",
        json.dumps({"spec": {"runPolicy": {"suspend": False}}}),
    )
    ns.wait_until(
        "workers running again", lambda: set(node_stack.node.running_containers(ns.name)) == running, 120
    )
    suspended = ns.condition("tfjob/pausable", "Suspended") or {}
    assert suspended.get("status") == "False"


def test_deleting_the_job_removes_every_container(node_stack: RealNodeStack, ns: Namespace) -> None:
    ns.create(job("TFJob", "doomed", {"Worker": replica(node_stack, "TFJob", "sleep 600", replicas=2)}))
    ns.wait_until("workers running", lambda: len(node_stack.node.running_containers(ns.name)) == 2, 120)
    ns.kubectl("delete", "tfjob/doomed", "--wait=true", "--timeout=60s")
    ns.wait_until("the job's pods gone", lambda: not ns.job_children("pods", "doomed", live=False), 90)
    ns.wait_until("no container running", lambda: not node_stack.node.running_containers(ns.name), 60)
