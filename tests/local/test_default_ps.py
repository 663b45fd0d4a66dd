"""`trainop run` with the default TensorFlow server (docs/parameter-server.md): the tensorflow-ps example
trains for real with ParameterServerStrategy against a PS and a Worker that run no code of the example's,
and a job whose Python has no TensorFlow fails with the cause named. Locally the "image" is this
machine's Python: a virtual environment without site packages stands for an image without TensorFlow."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.local.runs import replica, trainop, write_job
from tests.local.test_examples import local_copy, require, stated
from trainop.extensions.parameterserver import DEFAULT_ENV, key_for
from trainop.extensions.parameterserver.tf_server import NO_TENSORFLOW
from trainop.jsontypes import Json


@dataclass(frozen=True)
class ExampleRun:
    done: subprocess.CompletedProcess[str]
    job: Json
    folder: Path

    def result(self) -> Json:
        out: Json = json.loads((self.folder / "result.json").read_text())
        return out


@pytest.fixture(scope="module")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> ExampleRun:
    require("tensorflow")
    tmp_path = tmp_path_factory.mktemp("tensorflow-ps")
    path, job = local_copy("tensorflow-ps", tmp_path, RESULT_PATH=str(tmp_path / "result.json"))
    done = trainop(str(path), "--workdir", str(tmp_path / "run"), "--timeout", "400", timeout=450)
    return ExampleRun(done, job, tmp_path)


def test_the_example_trains_to_its_stated_accuracy_and_succeeds(example_run: ExampleRun) -> None:
    done = example_run.done
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "job Succeeded: TFJob default/tf-ps successfully completed." in done.stdout
    result = example_run.result()
    assert stated(example_run.job, "ACCURACY_TARGET") == 0.95
    assert result["accuracy"] >= 0.95
    assert result["last_loss"] < result["first_loss"]
    assert "[chief-0] chief: test accuracy" in done.stdout


def test_the_variables_live_on_the_default_parameter_server(example_run: ExampleRun) -> None:
    result = example_run.result()
    assert result["variable_devices"] == ["/job:ps/replica:0/task:0/device:CPU:0"]
    assert sorted(result["cluster"]) == ["chief", "ps", "worker"]


@pytest.mark.parametrize("task", ["ps", "worker"])
def test_the_ps_and_worker_ran_the_default_server_until_sigterm(example_run: ExampleRun, task: str) -> None:
    log = (example_run.folder / "run" / "logs" / f"tf-ps-{task}-0" / "tensorflow.log").read_text()
    version = importlib.metadata.version("tensorflow-cpu")
    assert f"trainop default server: TensorFlow {version} {task} 0 serving grpc://" in log
    # Printed when the stop signal arrives, right before the program returns 0.
    assert "trainop default server: stopping on SIGTERM" in log


@pytest.fixture(scope="module")
def no_tensorflow(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PATH whose `python3` is a Python without TensorFlow (nor anything else but the standard library)."""
    venv = tmp_path_factory.mktemp("no-tensorflow") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    check = subprocess.run([str(bin_dir / "python3"), "-c", "import tensorflow"], capture_output=True)
    assert check.returncode != 0
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}


def job_with_plain_ps(tmp_path: Path, annotated: bool) -> Path:
    """A Chief that only waits (the standard library) and a PS that sets no command."""
    path = write_job(
        tmp_path,
        "TFJob",
        name="no-tf",
        Chief=replica("TFJob", ["python3", "-c", "import time; time.sleep(300)"]),
        PS={
            "replicas": 1,
            "restartPolicy": "Never",
            "template": {
                "spec": {"containers": [{"name": "tensorflow", "image": "trainop-examples/mxnet:latest"}]}
            },
        },
    )
    if annotated:
        job = yaml.safe_load(path.read_text())
        job["metadata"]["annotations"] = {key_for("PS"): "tensorflow"}
        path.write_text(yaml.safe_dump(job))
    return path


def assert_failed_naming_the_cause(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode != 0
    assert (
        "TFJob default/no-tf has failed because 1 PS replica(s) failed. no-tf-ps-0 ran the default "
        f'TensorFlow server ({key_for("PS")}) in image "trainop-examples/mxnet:latest", which has no '
        f"TensorFlow (exit code {NO_TENSORFLOW})"
    ) in done.stdout, done.stdout[-3000:]
    assert f"trainop: ps-0/tensorflow exited with code {NO_TENSORFLOW}" in done.stdout
    assert "[ps-0] trainop default server: this image has no TensorFlow" in done.stdout


def test_without_tensorflow_the_job_fails_naming_the_cause(
    tmp_path: Path, no_tensorflow: dict[str, str]
) -> None:
    path = job_with_plain_ps(tmp_path, annotated=True)
    done = trainop(str(path), "--workdir", str(tmp_path / "run"), "--timeout", "120", extra_env=no_tensorflow)
    assert_failed_naming_the_cause(done)


def test_the_cluster_default_gives_a_ps_without_a_command_the_default_server(
    tmp_path: Path, no_tensorflow: dict[str, str]
) -> None:
    path = job_with_plain_ps(tmp_path, annotated=False)
    done = trainop(
        str(path),
        "--workdir",
        str(tmp_path / "run"),
        "--timeout",
        "120",
        extra_env={**no_tensorflow, DEFAULT_ENV: "true"},
    )
    assert_failed_naming_the_cause(done)
