"""Invalid jobs are rejected by our validating webhook at create/update time, and kubectl prints why."""

from __future__ import annotations

import json
from typing import Any

import pytest
from trainop_stack import KINDS, Namespace, job, kwok_annotations, replica

pytestmark = pytest.mark.e2e

DENIED = 'admission webhook "validate.trainop.kubeflow.org" denied the request: '

# Written as YAML on purpose: two spellings of one replica type are two distinct keys to YAML and JSON.
DUPLICATE_TYPES = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: duplicate-types
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers: [{name: pytorch, image: trainop-e2e/noop:1}]
    worker:
      replicas: 2
      template:
        spec:
          containers: [{name: pytorch, image: trainop-e2e/noop:1}]
"""

INVALID: dict[str, tuple[str, str, dict[str, Any] | str, str]] = {
    "xgboostjob-without-master": (
        "XGBoostJob", "no-master",
        job("XGBoostJob", "no-master", {"Worker": replica("XGBoostJob", replicas=2)}),
        "spec.xgbReplicaSpecs: Required value: must contain exactly one Master (found none)",
    ),
    "duplicate-replica-types": (
        "PyTorchJob", "duplicate-types", DUPLICATE_TYPES,
        'Duplicate value: "worker" and "Worker" name the same replica type Worker',
    ),
    "missing-default-container": (
        "PyTorchJob", "no-pytorch-container",
        job("PyTorchJob", "no-pytorch-container", {"Master": replica("PyTorchJob", container="main")}),
        "spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: "
        'must have at least one container named "pytorch" (found "main")',
    ),
    "bad-name": (
        # A valid object name for the apiserver (DNS-1123 subdomain), not a DNS-1035 label for pods.
        "TFJob", "tf.v2",
        job("TFJob", "tf.v2", {"Worker": replica("TFJob")}),
        'metadata.name: Invalid value: "tf.v2": must be a DNS-1035 label',
    ),
    "name-too-long-for-children": (
        "JAXJob", "j" * 55,
        job("JAXJob", "j" * 55, {"Worker": replica("JAXJob", replicas=12)}),
        f'the child name "{"j" * 55}-worker-11" would be 65 characters, '
        "over the 63-character DNS label limit",
    ),
    "mpijob-without-launcher": (
        "MPIJob", "no-launcher",
        job("MPIJob", "no-launcher", {"Worker": replica("MPIJob", replicas=2)}),
        "spec.mpiReplicaSpecs: Required value: must contain exactly one Launcher (found none)",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_job_is_rejected_at_create_with_our_message(module_namespace: Namespace, case: str) -> None:
    kind, name, manifest, message = INVALID[case]
    res = module_namespace.apply(manifest, check=False)
    assert res.returncode != 0, f"{case} was admitted:\n{res.stdout}"
    assert DENIED in res.stderr, res.stderr
    assert message in res.stderr, res.stderr
    assert not module_namespace.exists(f"{KINDS[kind]['plural']}.kubeflow.org/{name}")


def _managed_job(managed_by: str) -> dict[str, Any]:
    # Suspended: nothing runs, only admission is under test.
    return job(
        "TFJob",
        "managed",
        {"Worker": replica("TFJob", annotations=kwok_annotations())},
        run_policy={"managedBy": managed_by, "suspend": True},
    )


def test_managed_by_is_immutable_on_update(module_namespace: Namespace) -> None:
    ns = module_namespace
    ns.apply(_managed_job("kubeflow.org/training-operator"))
    immutable = 'spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable'

    res = ns.apply(_managed_job("kueue.x-k8s.io/multikueue"), check=False)
    assert res.returncode != 0 and DENIED in res.stderr and immutable in res.stderr, res.stderr

    patch = {"spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}}
    res = ns.kubectl("patch", "tfjob/managed", "--type=merge", "-p", json.dumps(patch), check=False)
    assert res.returncode != 0 and DENIED in res.stderr and immutable in res.stderr, res.stderr

    res = ns.kubectl(
        "patch", "tfjob/managed", "--type=json",
        "-p", json.dumps([{"op": "remove", "path": "/spec/runPolicy/managedBy"}]), check=False,
    )  # fmt: skip
    assert res.returncode != 0 and "spec.runPolicy.managedBy" in res.stderr, res.stderr

    assert ns.get("tfjob/managed")["spec"]["runPolicy"]["managedBy"] == "kubeflow.org/training-operator"
    # Other updates of the same job still pass.
    ns.kubectl("label", "tfjob/managed", "team=e2e")
    ns.kubectl("patch", "tfjob/managed", "--type=merge", "-p", '{"spec":{"runPolicy":{"backoffLimit":2}}}')


def test_invalid_update_is_rejected(module_namespace: Namespace) -> None:
    ns = module_namespace
    ns.apply(
        job(
            "XGBoostJob",
            "xgb-update",
            {"Master": replica("XGBoostJob"), "Worker": replica("XGBoostJob")},
            run_policy={"suspend": True},
        )
    )
    patch = {"spec": {"xgbReplicaSpecs": {"Master": {"replicas": 2}}}}
    res = ns.kubectl("patch", "xgboostjob/xgb-update", "--type=merge", "-p", json.dumps(patch), check=False)
    assert res.returncode != 0 and DENIED in res.stderr, res.stderr
    assert "spec.xgbReplicaSpecs[Master].replicas: Forbidden: Master must have exactly 1 replica, got 2" in (
        res.stderr
    )
    assert ns.get("xgboostjob/xgb-update")["spec"]["xgbReplicaSpecs"]["Master"]["replicas"] == 1
