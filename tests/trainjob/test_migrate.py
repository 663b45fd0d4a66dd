"""`trainop migrate`: a v1 job as a TrainJob and its TrainingRuntime, with what it cannot carry named."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.builders import container, job, replica
from trainop.examples import example, examples
from trainop.jsontypes import Json
from trainop.trainjob import constants as c
from trainop.trainjob.build import desired_jobset
from trainop.trainjob.migrate import POLICY_OF, MigrationError, migrate

REPO = Path(__file__).resolve().parents[2]
MIGRATING = [e.name for e in examples() if e.kind in POLICY_OF]


def with_command(command: list[str]) -> Json:
    return replica("PyTorchJob", containers=[container("pytorch", command=command)])


def node_template(migration_runtime: Json) -> Json:
    rjob: Json = migration_runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    template: Json = rjob["template"]["spec"]["template"]
    return template


@pytest.mark.parametrize("name", MIGRATING)
def test_every_example_of_a_kind_with_a_policy_migrates_to_a_buildable_trainjob(name: str) -> None:
    m = migrate(example(name).job)
    jobset = desired_jobset({**m.train_job, "metadata": {**m.train_job["metadata"], "uid": "u"}}, m.runtime)
    nodes = [r for r in jobset["spec"]["replicatedJobs"] if r["name"] == c.NODE]
    assert nodes and nodes[0]["template"]["spec"]["parallelism"] == m.train_job["spec"]["trainer"]["numNodes"]


def test_a_pytorch_job_becomes_one_node_per_replica_running_torchrun_once_per_node() -> None:
    m = migrate(example("pytorch").job)
    assert m.train_job["spec"]["trainer"] == {"numNodes": 3, "numProcPerNode": 1}
    assert m.train_job["spec"]["runtimeRef"] == {
        "name": "pytorch-dist-digits", "apiGroup": c.GROUP, "kind": "TrainingRuntime"
    }  # fmt: skip
    assert m.runtime["spec"]["mlPolicy"] == {"numNodes": 3, "torch": {}}
    container = node_template(m.runtime)["spec"]["containers"][0]
    assert (container["name"], container["command"]) == ("node", ["torchrun", "/example/train.py"])
    assert any("python3 -> torchrun" in line for line in m.changed)


def test_a_command_that_is_not_a_python_script_is_kept_as_it_is() -> None:
    v1 = job("PyTorchJob", Master=with_command(["bash", "-c", "python3 train.py"]))
    m = migrate(v1)
    assert node_template(m.runtime)["spec"]["containers"][0]["command"] == ["bash", "-c", "python3 train.py"]
    assert "numProcPerNode" not in m.train_job["spec"]["trainer"]


def test_run_policy_fields_a_trainjob_has_are_carried() -> None:
    v1 = job("PyTorchJob", Master=replica("PyTorchJob"))
    v1["spec"]["runPolicy"] = {"suspend": True, "activeDeadlineSeconds": 600, "backoffLimit": 2}
    m = migrate(v1)
    assert (m.train_job["spec"]["suspend"], m.train_job["spec"]["activeDeadlineSeconds"]) == (True, 600)
    assert m.runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] == 2


def test_run_policy_fields_a_trainjob_has_not_are_named_only_when_the_job_sets_them() -> None:
    v1 = job("PyTorchJob", Master=replica("PyTorchJob"))
    assert not any("runPolicy" in line for line in migrate(v1).not_carried)
    v1["spec"]["runPolicy"] = {"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60}
    named = [line.split(":")[0] for line in migrate(v1).not_carried if line.startswith("spec.runPolicy")]
    assert named == ["spec.runPolicy.cleanPodPolicy", "spec.runPolicy.ttlSecondsAfterFinished"]


def test_a_worker_template_unlike_the_masters_is_named() -> None:
    v1 = job("PyTorchJob", Master=with_command(["python3", "a.py"]), Worker=with_command(["python3", "b.py"]))
    assert any(
        line.startswith("spec.pytorchReplicaSpecs[Worker].template: differs from Master's")
        for line in migrate(v1).not_carried
    )


def test_the_env_the_v1_pods_got_and_the_node_does_not_is_named() -> None:
    lost = [line for line in migrate(example("xgboost").job).not_carried if line.startswith("env:")]
    assert len(lost) == 1
    assert "MASTER_ADDR" in lost[0] and "WORLD_SIZE" in lost[0] and "DMLC_TRACKER_URI" in lost[0]


def test_torchruns_own_variables_are_not_counted_as_lost() -> None:
    (lost,) = [line for line in migrate(example("pytorch").job).not_carried if line.startswith("env:")]
    assert "RANK" not in lost.split("(")[0] and "MASTER_ADDR" not in lost.split("(")[0]


def test_a_kind_without_a_trainer_policy_is_refused_naming_the_kind() -> None:
    with pytest.raises(MigrationError, match="kind: TFJob has no Trainer v2 ML policy"):
        migrate(example("tensorflow").job)


def test_a_job_without_its_framework_container_is_refused_naming_the_field() -> None:
    v1 = copy.deepcopy(example("pytorch").job)
    for rspec in v1["spec"]["pytorchReplicaSpecs"].values():
        rspec["template"]["spec"]["containers"][0]["name"] = "trainer"
    with pytest.raises(
        MigrationError,
        match=r"not valid: spec.pytorchReplicaSpecs\[Master\].template.spec.containers: Required value",
    ):
        migrate(v1)


def run_migrate(stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainop.cli", "migrate", "-"],
        input=stdin, capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip


def test_the_command_prints_the_manifest_with_each_job_replaced_and_reports_on_stderr() -> None:
    result = run_migrate(example("pytorch").document)
    assert result.returncode == 0, result.stderr
    kinds = [doc["kind"] for doc in yaml.safe_load_all(result.stdout)]
    assert kinds == ["ConfigMap", "TrainingRuntime", "TrainJob"]
    assert result.stderr.startswith(
        "PyTorchJob pytorch-dist-digits -> TrainJob and TrainingRuntime pytorch-dist-digits\n"
    )
    assert "  not carried: env: the node no longer gets PYTHONUNBUFFERED" in result.stderr


def test_the_command_prints_nothing_and_fails_for_a_job_that_cannot_migrate() -> None:
    result = run_migrate(example("tensorflow").document)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("trainop migrate: document 2 (TFJob tf-rendezvous): kind: TFJob")


def test_an_invalid_job_is_refused_with_the_admission_message() -> None:
    v1 = job("PyTorchJob", Master=replica("PyTorchJob", replicas=2))
    with pytest.raises(MigrationError, match=r"the PyTorchJob is not valid: .*Master"):
        migrate(v1)
