"""The packaged examples (trainop/examples/) train for real through `trainop run`, their scripts mounted
from the ConfigMap of their own document: every rank takes part and the accuracy each YAML states is
reached. Frameworks that cannot be installed here prove their rendezvous."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.local.runs import REPO, trainop
from trainop.examples import example as packaged
from trainop.frameworks import kind_info
from trainop.jsontypes import Json


def require(*modules: str) -> None:
    """Fail with the fix where a framework is missing: hack/install.sh installs every one of them."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            pytest.fail(f"{module} is not installed ({exc}); run hack/install-examples.sh")


def local_copy(example: str, tmp_path: Path, **env: str) -> tuple[Path, Json]:
    """The example's document (the script's ConfigMap, then the job) with result locations added to
    every container."""
    config_map, job = (d for d in yaml.safe_load_all(packaged(example).document) if d)
    for rspec in job["spec"][kind_info(job["kind"]).replica_field].values():
        for container in rspec["template"]["spec"]["containers"]:
            container["env"] = [*container.get("env", []), *({"name": k, "value": v} for k, v in env.items())]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all([config_map, job]))
    return path, job


def stated(job: Json, name: str) -> float:
    """A target as the example's YAML states it for its users."""
    values = {
        e["value"]
        for rspec in job["spec"][kind_info(job["kind"]).replica_field].values()
        for c in rspec["template"]["spec"]["containers"]
        for e in c.get("env", [])
        if e["name"] == name
    }
    assert len(values) == 1, values
    return float(values.pop())


def run_example(example: str, tmp_path: Path, timeout: float = 600, **env: str) -> tuple[str, Json]:
    path, job = local_copy(example, tmp_path, **env)
    result = trainop(
        str(path), "--workdir", str(tmp_path / "run"), "--timeout", str(timeout - 30), timeout=timeout
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "job Succeeded" in result.stdout
    return result.stdout, job


def test_pytorch_ddp_reaches_its_stated_accuracy_with_every_rank(tmp_path: Path) -> None:
    require("torch", "sklearn")
    out, job = run_example("pytorch", tmp_path, RESULT_PATH=str(tmp_path / "result.json"))
    result = json.loads((tmp_path / "result.json").read_text())
    assert stated(job, "ACCURACY_TARGET") == 0.90
    assert result["accuracy"] >= 0.90
    assert result["world_size"] == 3
    assert [r["rank"] for r in result["ranks"]] == [0, 1, 2]
    assert len({r["pid"] for r in result["ranks"]}) == 3
    for prefix, rank in (("master-0", 0), ("worker-0", 1), ("worker-1", 2)):
        assert f"[{prefix}] rank {rank}/3: test accuracy" in out


def test_xgboost_reaches_its_stated_accuracy_with_every_rank(tmp_path: Path) -> None:
    require("xgboost", "sklearn")
    out, job = run_example("xgboost", tmp_path, RESULT_PATH=str(tmp_path / "result.json"))
    result = json.loads((tmp_path / "result.json").read_text())
    assert stated(job, "ACCURACY_TARGET") == 0.93
    assert result["accuracy"] >= 0.93
    assert (result["world_size"], result["ranks"], result["same_model"]) == (3, [0, 1, 2], True)
    assert "[worker-1] rank 2/3: joined the collective" in out


def test_jax_processes_form_one_group_and_fit_the_model(tmp_path: Path) -> None:
    require("jax", "sklearn")
    run_example("jax", tmp_path, RESULT_PATH=str(tmp_path / "result.json"))
    result = json.loads((tmp_path / "result.json").read_text())
    assert (result["num_processes"], result["seen"]) == (2, [1.0, 1.0])
    assert result["r2"] >= result["target"] == 0.30


def test_mpi_launcher_runs_every_rank_through_the_hostfile(tmp_path: Path) -> None:
    require("mpi4py", "sklearn")
    assert shutil.which("mpirun"), "Open MPI (mpirun) is not installed; run hack/install-examples.sh mpi"
    path, job = local_copy("mpi", tmp_path, RESULT_PATH=str(tmp_path / "result.json"))
    result = trainop(str(path), "--workdir", str(tmp_path / "run"), "--timeout", "240", timeout=300)
    assert result.returncode == 0, result.stdout[-4000:]
    outcome = json.loads((tmp_path / "result.json").read_text())
    assert stated(job, "ACCURACY_TARGET") == 0.93
    assert outcome["accuracy"] >= 0.93 and outcome["seen"] == [1.0] * 4


@pytest.mark.parametrize(
    ("example", "replicas"),
    [
        ("tensorflow", {"ps:0", "worker:0", "worker:1"}),
        ("mxnet", {"scheduler:0", "server:0", "worker:0", "worker:1"}),
    ],
)
def test_rendezvous_examples_reach_every_other_replica(
    tmp_path: Path, example: str, replicas: set[str]
) -> None:
    (tmp_path / "results").mkdir()
    run_example(example, tmp_path, timeout=120, RESULT_DIR=str(tmp_path / "results"))
    results = [json.loads(f.read_text()) for f in (tmp_path / "results").glob("*.json")]
    assert {r["task"] for r in results} == replicas
    for r in results:
        assert set(r["reached"]) == set(r["heard"]) == replicas - {r["task"]}


def test_paddle_pods_all_reach_the_master(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    run_example("paddle", tmp_path, timeout=120, RESULT_DIR=str(tmp_path / "results"))
    results = {
        r["pod"]: r for r in (json.loads(f.read_text()) for f in (tmp_path / "results").glob("*.json"))
    }
    pods = ["paddle-rendezvous-master-0", "paddle-rendezvous-worker-0", "paddle-rendezvous-worker-1"]
    assert set(results) == set(pods)
    assert [results[p]["leader"] for p in pods] == [True, False, False]
    assert all(r["roster"] == pods for r in results.values())


def test_a_packaged_example_runs_by_its_name_with_no_file(tmp_path: Path) -> None:
    result = trainop("example:tensorflow", "--workdir", str(tmp_path / "run"), "--timeout", "90", timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "job Succeeded" in result.stdout
    # The script came from the ConfigMap of the example's document, mounted into each pod's folder.
    mounted = tmp_path / "run" / "volumes" / "tf-rendezvous-worker-0" / "example" / "rendezvous.py"
    assert mounted.read_text() == (REPO / "trainop" / "examples" / "tensorflow" / "rendezvous.py").read_text()
