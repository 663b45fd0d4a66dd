"""The unchanged Kubeflow Python SDK (``kubeflow-training`` 1.9.4 from PyPI) against our operator."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainop_stack import IMAGE, Namespace, kwok_annotations

pytestmark = pytest.mark.e2e


def test_training_client_pytorchjob_round_trip(namespace: Namespace, kubeconfig: Path) -> None:
    try:
        from kubeflow.training import (
            KubeflowOrgV1PyTorchJob,
            KubeflowOrgV1PyTorchJobSpec,
            KubeflowOrgV1ReplicaSpec,
            KubeflowOrgV1RunPolicy,
            TrainingClient,
        )
        from kubernetes.client import V1Container, V1ObjectMeta, V1PodSpec, V1PodTemplateSpec
    except ImportError as e:  # never skip: a missing SDK is a broken test environment
        pytest.fail(f"the Kubeflow SDK is not installed ({e}); pip install kubeflow-training==1.9.4")

    def replica_spec(replicas: int) -> KubeflowOrgV1ReplicaSpec:
        return KubeflowOrgV1ReplicaSpec(
            replicas=replicas,
            restart_policy="OnFailure",
            template=V1PodTemplateSpec(
                metadata=V1ObjectMeta(annotations=kwok_annotations(run_for="2s")),
                spec=V1PodSpec(containers=[V1Container(name="pytorch", image=IMAGE)]),
            ),
        )

    job = KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        metadata=V1ObjectMeta(name="sdk-mnist", namespace=namespace.name),
        spec=KubeflowOrgV1PyTorchJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            pytorch_replica_specs={"Master": replica_spec(1), "Worker": replica_spec(2)},
        ),
    )
    client = TrainingClient(config_file=str(kubeconfig), namespace=namespace.name)
    client.create_job(job=job)

    done = client.wait_for_job_conditions(
        "sdk-mnist", namespace=namespace.name, wait_timeout=60, polling_interval=1
    )
    assert done.status.conditions[-1].type == "Succeeded"
    assert client.is_job_succeeded("sdk-mnist", namespace=namespace.name)
    assert not client.is_job_failed("sdk-mnist", namespace=namespace.name)
    assert done.status.replica_statuses["Worker"].succeeded == 2

    pods = client.get_job_pods("sdk-mnist", namespace=namespace.name)
    assert sorted(p.metadata.name for p in pods) == [
        "sdk-mnist-master-0",
        "sdk-mnist-worker-0",
        "sdk-mnist-worker-1",
    ]
    (master,) = client.get_job_pods("sdk-mnist", namespace=namespace.name, is_master=True)
    assert master.metadata.name == "sdk-mnist-master-0"
    (worker,) = client.get_job_pods(
        "sdk-mnist", namespace=namespace.name, replica_type="worker", replica_index=1
    )
    assert worker.metadata.name == "sdk-mnist-worker-1"
    assert [j.metadata.name for j in client.list_jobs(namespace=namespace.name)] == ["sdk-mnist"]

    client.delete_job("sdk-mnist", namespace=namespace.name)
    namespace.wait_until("job deleted", lambda: not namespace.exists("pytorchjob/sdk-mnist"), timeout=30)
    namespace.wait_children("pods", "sdk-mnist", set(), timeout=30)
