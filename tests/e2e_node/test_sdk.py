"""The unchanged Kubeflow SDK (``kubeflow-training`` 1.9.4) on the real node: ``TrainingClient`` creates
the PyTorch example as a PyTorchJob (its script's ConfigMap applied first), waits for it, and
``get_job_logs`` returns the real training's output from the master's container."""

from __future__ import annotations

import re

import pytest
import yaml
from trainop_stack import Namespace

from tests.e2e_node.realnode import RealNodeStack
from trainop.examples import example as packaged


@pytest.mark.usefixtures("training_images")
def test_training_client_trains_and_returns_the_training_logs(
    node_stack: RealNodeStack, ns: Namespace, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        from kubeflow.training import (
            KubeflowOrgV1PyTorchJob,
            KubeflowOrgV1PyTorchJobSpec,
            KubeflowOrgV1ReplicaSpec,
            KubeflowOrgV1RunPolicy,
            TrainingClient,
        )
        from kubernetes.client import (
            V1ConfigMapVolumeSource,
            V1Container,
            V1EnvVar,
            V1ObjectMeta,
            V1PodSpec,
            V1PodTemplateSpec,
            V1Volume,
            V1VolumeMount,
        )
    except ImportError as e:  # never skip: a missing SDK is a broken test environment
        pytest.fail(f"the Kubeflow SDK is not installed ({e}); pip install kubeflow-training==1.9.4")

    # The example's own container (image, command, env, the script's mount), expressed through the
    # SDK's models; the ConfigMap holding the script is applied as the example's file has it.
    config_map, example = (d for d in yaml.safe_load_all(packaged("pytorch").document) if d)
    ns.apply(config_map)
    pod = example["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    (container,) = pod["containers"]
    ((mount,), (volume,)) = container["volumeMounts"], pod["volumes"]

    def replica_spec(replicas: int) -> KubeflowOrgV1ReplicaSpec:
        return KubeflowOrgV1ReplicaSpec(
            replicas=replicas,
            restart_policy="OnFailure",
            template=V1PodTemplateSpec(
                spec=V1PodSpec(
                    containers=[
                        V1Container(
                            name="pytorch",
                            image=container["image"],
                            command=container["command"],
                            env=[V1EnvVar(name=e["name"], value=e["value"]) for e in container["env"]],
                            volume_mounts=[
                                V1VolumeMount(
                                    name=mount["name"], mount_path=mount["mountPath"], read_only=True
                                )
                            ],
                        )
                    ],
                    volumes=[
                        V1Volume(
                            name=volume["name"],
                            config_map=V1ConfigMapVolumeSource(name=volume["configMap"]["name"]),
                        )
                    ],
                )
            ),
        )

    job = KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        metadata=V1ObjectMeta(name="sdk-digits", namespace=ns.name),
        spec=KubeflowOrgV1PyTorchJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            pytorch_replica_specs={"Master": replica_spec(1), "Worker": replica_spec(1)},
        ),
    )
    client = TrainingClient(config_file=str(node_stack.kubeconfig), namespace=ns.name)
    client.create_job(job=job)
    done = client.wait_for_job_conditions(
        "sdk-digits", namespace=ns.name, wait_timeout=600, polling_interval=2
    )
    assert done.status.conditions[-1].type == "Succeeded"

    logs, _ = client.get_job_logs("sdk-digits", namespace=ns.name, job_kind="PyTorchJob")
    assert list(logs) == ["sdk-digits-master-0"]
    match = re.search(
        r"rank 0/2: test accuracy (?P<value>[0-9.]+) \(target 0\.90\)", logs["sdk-digits-master-0"]
    )
    assert match, logs
    with capsys.disabled():
        print(f"\n[sdk] get_job_logs sdk-digits-master-0: {match.group(0)}")
    assert float(match["value"]) >= 0.90
