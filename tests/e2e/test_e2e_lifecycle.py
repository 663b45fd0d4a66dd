"""Job lifecycles on kwok: children, env, conditions, restarts, cleanup, suspend, deadlines, TTL, GC, scale.

Pods never run anything: kwok moves them through Pending -> Running -> Succeeded/Failed as their
``e2e.kwok.io/*`` annotations say (tests/e2e/kwok-stages.yaml); everything else is the real apiserver,
scheduler, garbage collector, the real Metacontroller and our hooks and webhooks.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import pytest
from trainop_stack import Namespace, job, kwok_annotations, replica

pytestmark = pytest.mark.e2e

LABEL = "training.kubeflow.org/"
RUN_FOREVER = kwok_annotations(outcome=None, run_for=None)


def env_of(pod: dict[str, Any], container: str) -> dict[str, str]:
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == container]
    return {e["name"]: e.get("value", "") for e in c.get("env", [])}


def true_conditions(ns: Namespace, ref: str) -> list[str]:
    return [c["type"] for c in ns.get(ref).get("status", {}).get("conditions") or [] if c["status"] == "True"]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_pytorchjob_children_labels_env_and_success(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "ddp",
            {
                "Master": replica("PyTorchJob", annotations=kwok_annotations(run_for="4s")),
                "Worker": replica("PyTorchJob", replicas=2, annotations=kwok_annotations(run_for="3s")),
            },
        )
    )
    names = {"ddp-master-0", "ddp-worker-0", "ddp-worker-1"}
    pods = ns.wait_children("pods", "ddp", names)
    services = ns.wait_children("services", "ddp", names)
    uid = ns.get("pytorchjob/ddp")["metadata"]["uid"]
    for name, pod in pods.items():
        rtype, index = name.split("-")[1], name.split("-")[2]
        labels = pod["metadata"]["labels"]
        assert labels[LABEL + "operator-name"] == "pytorchjob-controller"
        assert labels[LABEL + "job-name"] == "ddp"
        assert labels[LABEL + "replica-type"] == rtype
        assert labels[LABEL + "replica-index"] == index
        assert (labels.get(LABEL + "job-role") == "master") == (rtype == "master")
        (owner,) = pod["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "ddp", "uid": uid,
            "controller": True, "blockOwnerDeletion": True,
        }  # fmt: skip
        env = env_of(pod, "pytorch")
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "ddp-master-0"
        assert env["MASTER_PORT"] == "23456"
        assert env["WORLD_SIZE"] == "3"
        assert env["RANK"] == env["PET_NODE_RANK"] == (index if rtype == "master" else str(int(index) + 1))
        assert env["PYTHONUNBUFFERED"] == "1"
        assert pod["spec"]["restartPolicy"] == "OnFailure"
        ports = pod["spec"]["containers"][0]["ports"]
        assert {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"} in ports
        init = [c["name"] for c in pod["spec"].get("initContainers", [])]
        assert init == ([] if rtype == "master" else ["init-pytorch"])
    for name, svc in services.items():
        spec = svc["spec"]
        assert spec["clusterIP"] == "None", f"{name} is not headless"
        assert spec["selector"] == {
            k: v for k, v in pods[name]["metadata"]["labels"].items()
            if k.startswith(LABEL) and not k.endswith("job-role")
        }  # fmt: skip
        assert [(p["name"], p["port"]) for p in spec["ports"]] == [("pytorchjob-port", 23456)]
        assert svc["metadata"]["ownerReferences"][0]["uid"] == uid

    ns.wait_for("pytorchjob/ddp", "Succeeded", timeout=60)
    status = ns.get("pytorchjob/ddp")["status"]
    assert status["replicaStatuses"]["Master"]["succeeded"] == 1
    assert status["replicaStatuses"]["Worker"]["succeeded"] == 2
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Created"]["reason"] == "PyTorchJobCreated"
    assert conditions["Running"]["status"] == "False"  # flipped when the job finished
    assert conditions["Succeeded"]["reason"] == "PyTorchJobSucceeded"
    assert status["conditions"][-1]["type"] == "Succeeded"
    # cleanPodPolicy defaults to None: every pod and service stays.
    assert set(ns.job_children("pods", "ddp")) == names
    assert set(ns.job_children("services", "ddp")) == names


def test_tfjob_tf_config(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "TFJob",
            "dist",
            {
                "PS": replica("TFJob", annotations=RUN_FOREVER),
                "Worker": replica("TFJob", replicas=2, annotations=kwok_annotations(run_for="2s")),
            },
        )
    )
    names = {"dist-ps-0", "dist-worker-0", "dist-worker-1"}
    pods = ns.wait_children("pods", "dist", names)
    ns.wait_children("services", "dist", names)
    cluster = {
        "ps": [f"dist-ps-0.{ns.name}.svc:2222"],
        "worker": [f"dist-worker-0.{ns.name}.svc:2222", f"dist-worker-1.{ns.name}.svc:2222"],
    }
    for name, pod in pods.items():
        _, rtype, index = name.split("-")
        raw = env_of(pod, "tensorflow")["TF_CONFIG"]
        assert json.loads(raw) == {
            "cluster": cluster,
            "task": {"type": rtype, "index": int(index)},
            "environment": "cloud",
        }
        assert raw.startswith('{"cluster":{"ps":['), raw  # Go's encoder: sorted keys, no spaces
        assert pod["metadata"]["labels"].get(LABEL + "job-role") == (
            "master" if name == "dist-worker-0" else None
        )
    # No Chief: worker-0 succeeding completes the job although the PS still runs.
    ns.wait_for("tfjob/dist", "Succeeded", timeout=60)
    assert ns.get("pod/dist-ps-0")["status"]["phase"] == "Running"


@pytest.mark.parametrize("restart_policy", ["Never", "ExitCode"])
def test_failing_replica_fails_the_job(namespace: Namespace, restart_policy: str) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "fails",
            {
                "Master": replica("PyTorchJob", restart_policy=restart_policy, annotations=RUN_FOREVER),
                "Worker": replica(
                    "PyTorchJob",
                    restart_policy=restart_policy,
                    annotations=kwok_annotations("Failed", "1s", exit_code=1),
                ),
            },
        )
    )
    ns.wait_for("pytorchjob/fails", "Failed", timeout=60)
    failed = ns.condition("pytorchjob/fails", "Failed")
    assert failed is not None and failed["reason"] == "PyTorchJobFailed"
    if restart_policy == "Never":
        assert failed["message"] == "PyTorchJob fails is failed because 1 Worker replica(s) failed."
    else:  # exit code 1 < 128: permanent, no restart
        assert failed["message"] == 'job "fails" is failing because "Worker" replica(s) failed.'
    pod = ns.get("pod/fails-worker-0")
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    assert "podRestarts" not in ns.get("pytorchjob/fails")["status"]
    assert "Succeeded" not in true_conditions(ns, "pytorchjob/fails")


def test_exit_code_137_restarts_the_pod_then_succeeds(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "retry",
            {
                "Master": replica(
                    "PyTorchJob", restart_policy="ExitCode", annotations=kwok_annotations(run_for="6s")
                )
            },
        )
    )
    first = ns.wait_phase("retry-master-0", "Running", timeout=60)
    first_uid = first["metadata"]["uid"]
    assert first["spec"]["restartPolicy"] == "Never"  # ExitCode is the controller's job, not kubelet's
    # The first incarnation is killed by SIGKILL (137); its replacement comes from the unchanged template.
    ns.kubectl(
        "annotate", "pod/retry-master-0", "--overwrite",
        "e2e.kwok.io/outcome=Failed", "e2e.kwok.io/exit-code=137", "e2e.kwok.io/run-for=100ms",
    )  # fmt: skip
    ns.wait_for("pytorchjob/retry", "Succeeded", timeout=60)
    status = ns.get("pytorchjob/retry")["status"]
    assert status["podRestarts"]["retry-master-0"] == {"count": 1, "uid": first_uid}
    assert "Failed" not in true_conditions(ns, "pytorchjob/retry")
    second = ns.get("pod/retry-master-0")
    assert second["metadata"]["uid"] != first_uid
    assert second["status"]["phase"] == "Succeeded"
    assert second["metadata"]["annotations"]["e2e.kwok.io/outcome"] == "Succeeded"


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        ("Running", {"clean-master-0"}),  # the finished master stays, the running worker goes
        ("All", set()),
    ],
)
def test_clean_pod_policy(namespace: Namespace, policy: str, kept: set[str]) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "clean",
            {
                "Master": replica("PyTorchJob", annotations=kwok_annotations(run_for="2s")),
                "Worker": replica("PyTorchJob", annotations=RUN_FOREVER),
            },
            run_policy={"cleanPodPolicy": policy},
        )
    )
    ns.wait_children("pods", "clean", {"clean-master-0", "clean-worker-0"})
    ns.wait_for("pytorchjob/clean", "Succeeded", timeout=60)
    ns.wait_children("pods", "clean", kept, timeout=30)
    ns.wait_children("services", "clean", kept, timeout=30)
    for name in kept:
        assert ns.get(f"pod/{name}")["status"]["phase"] == "Succeeded"


def test_suspend_deletes_pods_and_resume_recreates_them(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "pause",
            {
                "Master": replica("PyTorchJob", annotations=RUN_FOREVER),
                "Worker": replica("PyTorchJob", replicas=2, annotations=RUN_FOREVER),
            },
        )
    )
    names = {"pause-master-0", "pause-worker-0", "pause-worker-1"}
    before = ns.wait_children("pods", "pause", names)
    ns.wait_for("pytorchjob/pause", "Running", timeout=60)

    ns.kubectl("patch", "pytorchjob/pause", "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":true}}}')
    ns.wait_children("pods", "pause", set(), timeout=30)
    ns.wait_children("services", "pause", set(), timeout=30)
    ns.wait_for("pytorchjob/pause", "Suspended", timeout=30)
    running = ns.condition("pytorchjob/pause", "Running")
    assert running is not None and running["status"] == "False"
    assert running["reason"] == "PyTorchJobSuspended"

    ns.kubectl("patch", "pytorchjob/pause", "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":false}}}')
    after = ns.wait_children("pods", "pause", names, timeout=30)
    ns.wait_children("services", "pause", names, timeout=30)
    assert all(after[n]["metadata"]["uid"] != before[n]["metadata"]["uid"] for n in names)
    ns.wait_for("pytorchjob/pause", "Running", timeout=30)
    suspended = ns.condition("pytorchjob/pause", "Suspended")
    assert suspended is not None and suspended["status"] == "False"
    assert suspended["reason"] == "PyTorchJobResumed"


def test_active_deadline_fails_a_quiet_job(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "deadline",
            {"Master": replica("PyTorchJob", annotations=RUN_FOREVER)},
            run_policy={"activeDeadlineSeconds": 5},
        )
    )
    # Once the pod runs nothing else happens: only the hook's resyncAfterSeconds can end the job.
    ns.wait_phase("deadline-master-0", "Running", timeout=30)
    ns.wait_for("pytorchjob/deadline", "Failed", timeout=30)
    status = ns.get("pytorchjob/deadline")["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "Job deadline has failed because it was active longer than specified deadline"
    elapsed = (ts(failed["lastTransitionTime"]) - ts(status["startTime"])).total_seconds()
    assert 5 <= elapsed <= 12, elapsed
    # cleanPodPolicy None (the default) keeps the pod, as Kubeflow v1.9.4 does.
    assert ns.get("pod/deadline-master-0")["status"]["phase"] == "Running"


def test_ttl_after_finished_deletes_the_job(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "ttl",
            {"Master": replica("PyTorchJob", annotations=kwok_annotations(run_for="1s"))},
            run_policy={"ttlSecondsAfterFinished": 2},
        )
    )
    ns.wait_for("pytorchjob/ttl", "Succeeded", timeout=60)
    finished = time.monotonic()
    ns.wait_until("pytorchjob/ttl deleted", lambda: not ns.exists("pytorchjob/ttl"), timeout=30)
    assert time.monotonic() - finished <= 15
    ns.wait_children("pods", "ttl", set(), timeout=30)
    ns.wait_children("services", "ttl", set(), timeout=30)


def test_deleting_a_job_garbage_collects_pods_and_services(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "XGBoostJob",
            "gc",
            {
                "Master": replica("XGBoostJob", annotations=RUN_FOREVER),
                "Worker": replica("XGBoostJob", replicas=2, annotations=RUN_FOREVER),
            },
        )
    )
    names = {"gc-master-0", "gc-worker-0", "gc-worker-1"}
    ns.wait_children("pods", "gc", names)
    ns.wait_children("services", "gc", names)
    ns.kubectl("delete", "xgboostjob/gc", "--wait=true", "--timeout=30s")
    ns.wait_children("pods", "gc", set(), timeout=30)
    ns.wait_children("services", "gc", set(), timeout=30)
    ns.wait_until("pods gone for good", lambda: not ns.items("pods"), timeout=30)


def test_kubectl_scale_changes_elastic_workers(namespace: Namespace) -> None:
    ns = namespace
    ns.apply(
        job(
            "PyTorchJob",
            "elastic",
            {"Worker": replica("PyTorchJob", replicas=2, annotations=RUN_FOREVER)},
            elasticPolicy={"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 3},
        )
    )
    ns.wait_children("pods", "elastic", {"elastic-worker-0", "elastic-worker-1"})
    ns.kubectl("scale", "--replicas=3", "pytorchjob/elastic")
    pods = ns.wait_children("pods", "elastic", {"elastic-worker-0", "elastic-worker-1", "elastic-worker-2"})
    ns.wait_children("services", "elastic", set(pods))
    assert ns.get("pytorchjob/elastic")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    env = env_of(pods["elastic-worker-2"], "pytorch")
    assert env["PET_NNODES"] == "1:3"
    assert env["PET_RDZV_ENDPOINT"] == "elastic-worker-0:23456"
    assert env["PET_RDZV_BACKEND"] == "c10d"
    # The scale subresource reads back what an HPA needs.
    ns.wait_until(
        "3 active workers in status",
        lambda: ns.get("pytorchjob/elastic")["status"]["replicaStatuses"]["Worker"].get("active") == 3,
        timeout=30,
    )
    scale = json.loads(ns.kubectl("get", "--raw", _scale_path(ns.name, "elastic")).stdout)
    assert scale["spec"]["replicas"] == 3
    assert scale["status"]["replicas"] == 3
    assert "training.kubeflow.org/replica-type=worker" in scale["status"]["selector"]

    ns.kubectl("scale", "--replicas=1", "pytorchjob/elastic")
    ns.wait_children("pods", "elastic", {"elastic-worker-0"}, timeout=30)
    ns.wait_children("services", "elastic", {"elastic-worker-0"}, timeout=30)


def _scale_path(namespace: str, name: str) -> str:
    return f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}/scale"
