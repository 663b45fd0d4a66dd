"""A job's TensorBoard on the real apiserver: what defaulting stores, the children, and their expiry.

kwok runs no container, so TensorBoard itself is not served here (the real-node tier does that); this
proves the objects: the annotation validated and defaulted, TENSORBOARD_LOG_DIR expanded per pod by the
apiserver's own `$(VAR)` rules on the kubelet side (the pod's env as stored), and the Deployment and
Service following the job, outliving it by `keep-after`, then removed; the Deployment following the job's
suspension; and the NetworkPolicy, created by Metacontroller under the chart's narrowed ClusterRole,
admitting the peers the servers were given as the chart's `tensorboard.ingressFrom` gives them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from trainop_stack import Namespace, TrainopStack, job, kwok_annotations, replica, scratch_namespace

from trainop.extensions.tensorboard import INGRESS_FROM_ENV

pytestmark = pytest.mark.e2e

TB = "trainop.dev/tensorboard"
INGRESS_NGINX = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "ingress-nginx"}},
}


@pytest.fixture(scope="module")
def board_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainopStack]:
    env = {INGRESS_FROM_ENV: json.dumps([INGRESS_NGINX])}
    with TrainopStack(tmp_path_factory.mktemp("e2e-tensorboard"), server_env=env) as stack:
        yield stack.start()


@pytest.fixture
def namespace(board_stack: TrainopStack) -> Iterator[Namespace]:
    with scratch_namespace(board_stack, "tensorboard") as ns:
        yield ns


def tb_job(
    name: str, annotations: dict[str, str], run_for: str = "3s", suspend: bool = False
) -> dict[str, Any]:
    out = job(
        "PyTorchJob",
        name,
        {
            "Master": replica("PyTorchJob", annotations=kwok_annotations(run_for=run_for)),
            "Worker": replica("PyTorchJob", 2, annotations=kwok_annotations(run_for=run_for)),
        },
    )
    out["metadata"]["annotations"] = annotations
    if suspend:
        out["spec"]["runPolicy"] = {"suspend": True}
    return out


def set_suspend(ns: Namespace, name: str, suspend: bool) -> None:
    patch = json.dumps({"spec": {"runPolicy": {"suspend": suspend}}})
    ns.kubectl("patch", f"pytorchjob/{name}", "--type=merge", "-p", patch)


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


def test_a_keep_after_beyond_30_days_is_denied_with_the_bound(namespace: Namespace) -> None:
    done = namespace.create(tb_job("long", {TB: "s3://exp", f"{TB}.keep-after": "999999d"}), check=False)
    assert done.returncode != 0
    assert f'metadata.annotations[{TB}.keep-after]: Invalid value: "999999d": at most 30d' in done.stderr


def test_a_suspended_job_gets_no_tensorboard_deployment(namespace: Namespace) -> None:
    ns = namespace
    ns.create(tb_job("queued", {TB: "s3://exp"}, suspend=True))
    ns.wait_for("pytorchjob/queued", "Suspended")
    # The sync that suspended it returned the board's Service and policy: Metacontroller created them.
    ns.wait_until("the TensorBoard policy", lambda: ns.exists("networkpolicy/queued-tensorboard"))
    assert ns.exists("service/queued-tensorboard")
    assert not ns.exists("deployment/queued-tensorboard")
    assert ns.items("pods") == []


def test_resuming_a_suspended_job_brings_its_tensorboard_deployment(namespace: Namespace) -> None:
    ns = namespace
    ns.create(tb_job("resumed", {TB: "s3://exp"}, run_for="60s", suspend=True))
    ns.wait_for("pytorchjob/resumed", "Suspended")
    set_suspend(ns, "resumed", False)
    ns.wait_until("the TensorBoard Deployment", lambda: ns.exists("deployment/resumed-tensorboard"))


def test_suspending_a_running_job_deletes_its_tensorboard_deployment(namespace: Namespace) -> None:
    ns = namespace
    ns.create(tb_job("paused", {TB: "s3://exp"}, run_for="120s"))
    ns.wait_until("the TensorBoard Deployment", lambda: ns.exists("deployment/paused-tensorboard"))
    set_suspend(ns, "paused", True)
    ns.wait_until(
        "the TensorBoard Deployment gone", lambda: not ns.exists("deployment/paused-tensorboard"), timeout=90
    )
    assert ns.exists("service/paused-tensorboard")
    assert ns.exists("networkpolicy/paused-tensorboard")


def test_the_network_policy_admits_only_the_configured_peers(namespace: Namespace) -> None:
    ns = namespace
    ns.create(tb_job("guarded", {TB: "s3://exp"}, run_for="60s"))
    ns.wait_until("the TensorBoard policy", lambda: ns.exists("networkpolicy/guarded-tensorboard"))
    policy = ns.get("networkpolicy/guarded-tensorboard")
    assert policy["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {"from": [INGRESS_NGINX], "ports": [{"protocol": "TCP", "port": 6006}]}
    ]
    ns.wait_until("the TensorBoard Deployment", lambda: ns.exists("deployment/guarded-tensorboard"))
    labels = ns.get("deployment/guarded-tensorboard")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"] == {"matchLabels": labels}


def test_a_job_without_the_annotation_has_no_network_policy(namespace: Namespace) -> None:
    ns = namespace
    ns.create(tb_job("plain", {}, run_for="2s"))
    ns.wait_for("pytorchjob/plain", "Succeeded", timeout=90)
    assert ns.items("networkpolicies") == []
