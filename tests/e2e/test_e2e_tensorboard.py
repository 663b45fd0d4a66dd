"""A job's TensorBoard on the real apiserver: what defaulting stores, the children, and their expiry.

kwok runs no container, so TensorBoard itself is not served here (the real-node tier does that); this
proves the objects: the annotation validated and defaulted, TENSORBOARD_LOG_DIR expanded per pod by the
apiserver's own `$(VAR)` rules on the kubelet side (the pod's env as stored), and the Deployment and
Service following the job, outliving it by `keep-after`, then removed.
"""

from __future__ import annotations

from typing import Any

import pytest
from trainop_stack import Namespace, job, kwok_annotations, replica

pytestmark = pytest.mark.e2e

TB = "trainop.dev/tensorboard"


def tb_job(name: str, annotations: dict[str, str], run_for: str = "3s") -> dict[str, Any]:
    out = job(
        "PyTorchJob",
        name,
        {
            "Master": replica("PyTorchJob", annotations=kwok_annotations(run_for=run_for)),
            "Worker": replica("PyTorchJob", 2, annotations=kwok_annotations(run_for=run_for)),
        },
    )
    out["metadata"]["annotations"] = annotations
    return out


def test_a_bad_log_directory_is_denied_naming_the_annotation(namespace: Namespace) -> None:
    done = namespace.create(tb_job("bad", {TB: "/mnt/logs"}), check=False)
    assert done.returncode != 0
    assert f"metadata.annotations[{TB}]" in done.stderr
    assert "s3://<bucket>" in done.stderr


def test_the_stored_job_shows_the_log_directory_and_keep_after(namespace: Namespace) -> None:
    namespace.create(tb_job("shown", {TB: "s3://experiments/run-7"}))
    stored = namespace.get("pytorchjob/shown")
    assert stored["metadata"]["annotations"][f"{TB}.keep-after"] == "1h"
    env = stored["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "TENSORBOARD_LOG_DIR",
        "value": "s3://experiments/run-7/worker-$(TRAINOP_REPLICA_INDEX)",
    } in env


def test_tensorboard_follows_the_job_and_outlives_it_by_keep_after(namespace: Namespace) -> None:
    ns = namespace
    ns.create(tb_job("tb", {TB: "s3://experiments/run-7", f"{TB}.keep-after": "8s"}))
    ns.wait_until("the TensorBoard Deployment", lambda: ns.exists("deployment/tb-tensorboard"))
    deployment = ns.get("deployment/tb-tensorboard")
    assert deployment["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--path_prefix=/tensorboard/" + ns.name + "/tb" in args
    service = ns.get("service/tb-tensorboard")
    assert service["spec"]["ports"][0]["port"] == 80
    ns.wait_for("pytorchjob/tb", "Succeeded", timeout=90)
    assert ns.exists("deployment/tb-tensorboard")
    ns.wait_until(
        "the TensorBoard gone after keep-after",
        lambda: not ns.exists("deployment/tb-tensorboard") and not ns.exists("service/tb-tensorboard"),
        timeout=90,
    )
    # The job's own children are untouched by TensorBoard's expiry.
    assert ns.exists("pytorchjob/tb")
