"""The JobSet a TrainJob and its runtime make: Trainer v2.3.0's pipeline as a pure function."""

from __future__ import annotations

import pytest

from tests.trainjob.builders import (
    container,
    env_of,
    node_container,
    patch,
    replicated_job,
    rjob_named,
    runtime,
    torch_runtime,
    train_job,
    trainer_step,
)
from trainop.trainjob.build import UnsupportedRuntime, desired_jobset

COMPLETION_INDEX = {
    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}


def test_the_jobset_is_named_after_the_trainjob_in_its_namespace() -> None:
    jobset = desired_jobset(train_job("mnist", trainer={}), torch_runtime())
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert jobset["kind"] == "JobSet"
    assert jobset["metadata"] == {"name": "mnist", "namespace": "team-a"}


def test_torch_trainer_gets_torchrun_env_and_the_rendezvous_port() -> None:
    jobset = desired_jobset(train_job("mnist", trainer={"numNodes": 2}), torch_runtime())
    node = node_container(jobset)
    assert env_of(node) == {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": COMPLETION_INDEX,
        "PET_MASTER_ADDR": "mnist-node-0-0.mnist",
        "PET_MASTER_PORT": "29500",
    }
    assert node["ports"] == [{"containerPort": 29500}]


def test_the_trainer_step_runs_one_job_of_num_nodes_indexed_pods() -> None:
    jobset = desired_jobset(train_job(trainer={"numNodes": 3}), torch_runtime())
    node = rjob_named(jobset, "node")
    assert node["replicas"] == 1
    assert node["template"]["spec"]["parallelism"] == 3
    assert node["template"]["spec"]["completions"] == 3


def test_the_runtimes_num_nodes_applies_when_the_trainjob_sets_none() -> None:
    jobset = desired_jobset(train_job(trainer={}), torch_runtime(num_nodes=4))
    assert rjob_named(jobset, "node")["template"]["spec"]["parallelism"] == 4
    assert env_of(node_container(jobset))["PET_NNODES"] == "4"


def test_without_a_trainer_section_the_node_container_gets_no_torch_env() -> None:
    jobset = desired_jobset(train_job(), torch_runtime(num_nodes=2))
    assert "env" not in node_container(jobset)
    assert rjob_named(jobset, "node")["template"]["spec"]["parallelism"] == 2


@pytest.mark.parametrize(
    ("resources", "nproc"),
    [
        ({"requests": {"cpu": "3"}}, "3"),
        ({"requests": {"cpu": "500m"}}, "1"),
        ({"limits": {"cpu": "2"}}, "2"),
        ({"requests": {"cpu": "0"}, "limits": {"cpu": "6"}}, "6"),
        ({"limits": {"nvidia.com/gpu": "2"}}, "auto"),
        ({}, "1"),
    ],
)
def test_processes_per_node_follow_cpus_unless_there_are_gpus(resources: dict, nproc: str) -> None:
    jobset = desired_jobset(train_job(trainer={"resourcesPerNode": resources}), torch_runtime())
    assert env_of(node_container(jobset))["PET_NPROC_PER_NODE"] == nproc


def test_num_proc_per_node_of_the_trainjob_wins_over_resources() -> None:
    job = train_job(trainer={"numProcPerNode": 8, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}}})
    assert env_of(node_container(desired_jobset(job, torch_runtime())))["PET_NPROC_PER_NODE"] == "8"


def test_the_runtimes_own_node_resources_count_when_the_trainjob_sets_none() -> None:
    rt = torch_runtime(trainer_step(container("node", resources={"requests": {"cpu": "4"}})))
    assert env_of(node_container(desired_jobset(train_job(trainer={}), rt)))["PET_NPROC_PER_NODE"] == "4"


def test_resources_per_node_merge_into_the_node_containers_resources() -> None:
    rt = torch_runtime(trainer_step(container("node", resources={"requests": {"cpu": "4", "memory": "1Gi"}})))
    job = train_job(trainer={"resourcesPerNode": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}})
    assert node_container(desired_jobset(job, rt))["resources"] == {
        "requests": {"cpu": "2", "memory": "1Gi"},
        "limits": {"cpu": "2"},
    }


def test_the_trainjobs_env_goes_before_torchs_and_replaces_the_runtimes_in_place() -> None:
    rt = torch_runtime(
        trainer_step(container("node", env=[{"name": "A", "value": "runtime"}, {"name": "B"}]))
    )
    job = train_job(trainer={"env": [{"name": "C", "value": "job"}, {"name": "A", "value": "job"}]})
    names = [e["name"] for e in node_container(desired_jobset(job, rt))["env"]]
    assert names[:3] == ["A", "B", "C"]
    assert names[3:] == [
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert env_of(node_container(desired_jobset(job, rt)))["A"] == "job"


def test_image_command_and_args_of_the_trainjob_replace_the_runtimes() -> None:
    job = train_job(trainer={"image": "ghcr.io/me/train:1", "command": ["torchrun"], "args": ["train.py"]})
    node = node_container(desired_jobset(job, torch_runtime()))
    assert (node["image"], node["command"], node["args"]) == (
        "ghcr.io/me/train:1",
        ["torchrun"],
        ["train.py"],
    )


def test_the_rendezvous_port_replaces_a_runtime_port_without_a_name() -> None:
    # Trainer matches ports by number or by name, and two absent names match.
    rt = torch_runtime(trainer_step(container("node", ports=[{"containerPort": 8080}])))
    assert node_container(desired_jobset(train_job(trainer={}), rt))["ports"] == [{"containerPort": 29500}]


def test_a_named_runtime_port_stays_beside_the_rendezvous_port() -> None:
    rt = torch_runtime(trainer_step(container("node", ports=[{"name": "metrics", "containerPort": 8080}])))
    ports = node_container(desired_jobset(train_job(trainer={}), rt))["ports"]
    assert ports == [{"name": "metrics", "containerPort": 8080}, {"containerPort": 29500}]


def test_env_injection_gives_torchs_env_to_the_named_init_container() -> None:
    step = trainer_step(container("node"))
    step["template"]["spec"]["template"]["spec"]["initContainers"] = [container("preflight")]
    rt = torch_runtime(step, envInjection={"targets": [{"jobName": "node", "containerNames": ["preflight"]}]})
    jobset = desired_jobset(train_job("mnist"), rt)
    init = rjob_named(jobset, "node")["template"]["spec"]["template"]["spec"]["initContainers"][0]
    assert env_of(init)["PET_MASTER_ADDR"] == "mnist-node-0-0.mnist"


def test_env_injection_into_a_missing_container_names_it() -> None:
    rt = torch_runtime(envInjection={"targets": [{"jobName": "node", "containerNames": ["sidecar"]}]})
    with pytest.raises(UnsupportedRuntime, match=r"spec.mlPolicy.torch.envInjection.*'sidecar'.*'node'"):
        desired_jobset(train_job(trainer={}), rt)


def test_a_plain_runtime_takes_num_nodes_and_env_but_adds_no_framework_env() -> None:
    job = train_job(trainer={"numNodes": 2, "env": [{"name": "EPOCHS", "value": "3"}]})
    jobset = desired_jobset(job, runtime())
    assert env_of(node_container(jobset)) == {"EPOCHS": "3"}
    assert "ports" not in node_container(jobset)
    assert rjob_named(jobset, "node")["template"]["spec"]["parallelism"] == 2


def test_jax_env_goes_before_the_trainjobs_own() -> None:
    job = train_job("jx", trainer={"numNodes": 2, "env": [{"name": "X", "value": "1"}]})
    env = node_container(desired_jobset(job, runtime(policy={"jax": {}})))["env"]
    assert [e["name"] for e in env] == ["JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS", "X"]
    assert env_of({"env": env})["JAX_COORDINATOR_ADDRESS"] == "jx-node-0-0.jx:29500"


def test_xgboost_counts_one_worker_per_gpu() -> None:
    job = train_job("xg", trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}})
    env = env_of(node_container(desired_jobset(job, runtime(policy={"xgboost": {}}))))
    assert env["DMLC_NUM_WORKER"] == "8"
    assert env["DMLC_TRACKER_URI"] == "xg-node-0-0.xg"
    assert env["DMLC_TASK_ID"] == COMPLETION_INDEX


@pytest.mark.parametrize("source", ["mpi", "flux"])
def test_a_runtime_of_an_unbuilt_policy_is_refused_by_name(source: str) -> None:
    with pytest.raises(UnsupportedRuntime, match=rf"spec\.mlPolicy\.{source}"):
        desired_jobset(train_job(trainer={}), runtime(policy={source: {}}))


def test_every_step_gets_parallelism_and_completions_from_its_count() -> None:
    rt = torch_runtime(replicated_job("prep", container("prep"), parallelism=3), trainer_step())
    jobset = desired_jobset(train_job(trainer={}), rt)
    assert rjob_named(jobset, "prep")["template"]["spec"]["parallelism"] == 3
    assert rjob_named(jobset, "prep")["template"]["spec"]["completions"] == 3
    assert "replicas" not in rjob_named(jobset, "prep")


def test_dataset_initializer_gets_the_storage_uri_env_and_secret() -> None:
    init = replicated_job(
        "dataset-initializer", container("dataset-initializer"), ancestor="dataset-initializer"
    )
    job = train_job(
        trainer={},
        initializer={
            "dataset": {
                "storageUri": "hf://tatsu-lab/alpaca",
                "env": [{"name": "SPLIT", "value": "train"}],
                "secretRef": {"name": "hf-token"},
            }
        },
    )
    jobset = desired_jobset(job, torch_runtime(init, trainer_step()))
    step = rjob_named(jobset, "dataset-initializer")
    init_container = node_container(jobset, "dataset-initializer", "dataset-initializer")
    assert step["replicas"] == 1
    assert env_of(init_container) == {"STORAGE_URI": "hf://tatsu-lab/alpaca", "SPLIT": "train"}
    assert init_container["envFrom"] == [{"secretRef": {"name": "hf-token"}}]


def test_suspend_is_copied_and_absent_when_the_trainjob_has_none() -> None:
    assert desired_jobset(train_job(suspend=True), torch_runtime())["spec"]["suspend"] is True
    assert "suspend" not in desired_jobset(train_job(), torch_runtime())["spec"]


def test_runtime_and_patch_labels_label_the_jobset_in_patch_order() -> None:
    patches = [
        patch("kueue.x-k8s.io/manager", metadata={"labels": {"team": "a", "tier": "1"}}),
        patch("example.com/second", metadata={"labels": {"tier": "2"}, "annotations": {"note": "x"}}),
    ]
    rt = torch_runtime()
    rt["spec"]["template"]["metadata"] = {"labels": {"trainer.kubeflow.org/framework": "torch"}}
    jobset = desired_jobset(train_job(runtimePatches=patches), rt)
    assert jobset["metadata"]["labels"] == {
        "trainer.kubeflow.org/framework": "torch",
        "team": "a",
        "tier": "2",
    }
    assert jobset["metadata"]["annotations"] == {"note": "x"}


def test_a_patch_merges_node_selector_and_replaces_tolerations_of_the_named_step() -> None:
    step = trainer_step()
    pod = step["template"]["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"disk": "ssd"}
    pod["tolerations"] = [{"key": "old", "operator": "Exists"}]
    placement = {"nodeSelector": {"zone": "a"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}
    p = patch(
        "kueue.x-k8s.io/manager",
        spec={"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": placement}}}}]},
    )
    jobset = desired_jobset(train_job(runtimePatches=[p]), torch_runtime(step))
    merged = rjob_named(jobset, "node")["template"]["spec"]["template"]["spec"]
    assert merged["nodeSelector"] == {"disk": "ssd", "zone": "a"}
    assert merged["tolerations"] == [{"key": "gpu", "operator": "Exists"}]


def test_patches_keep_the_runtimes_step_order() -> None:
    rt = torch_runtime(
        replicated_job("a", container("a")), replicated_job("b", container("b")), trainer_step()
    )
    p = patch("x.io/m", spec={"replicatedJobs": [{"name": "node"}, {"name": "b"}]})
    jobset = desired_jobset(train_job(runtimePatches=[p]), rt)
    assert [r["name"] for r in jobset["spec"]["replicatedJobs"]] == ["a", "b", "node"]


def test_the_runtime_is_not_changed_by_building() -> None:
    rt = torch_runtime()
    before = repr(rt)
    desired_jobset(train_job(trainer={"numNodes": 2, "env": [{"name": "A", "value": "1"}]}), rt)
    assert repr(rt) == before


def test_a_runtime_with_gang_scheduling_is_refused_by_name() -> None:
    rt = torch_runtime()
    rt["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    with pytest.raises(UnsupportedRuntime, match=r"spec\.podGroupPolicy"):
        desired_jobset(train_job(trainer={}), rt)


def test_a_torchtune_command_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedRuntime, match=r"spec\.trainer\.command"):
        desired_jobset(train_job(trainer={"command": ["tune", "run"]}), torch_runtime())
