"""The default server program itself (trainop/extensions/parameterserver/tf_server.py), run as a pod runs
it: the server it starts from TF_CONFIG (a stand-in `tensorflow` records what it was asked for), a clean
exit on SIGTERM, and the exit code and termination message when the interpreter has no TensorFlow
(`python -S`: the standard library only, as in an image without TensorFlow)."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.local.helpers import eventually
from trainop.extensions.parameterserver import tf_server
from trainop.extensions.parameterserver.tf_server import BAD_TF_CONFIG, NO_TENSORFLOW
from trainop.jsontypes import Json

PROGRAM = Path(tf_server.__file__)
CLUSTER = {"chief": ["j-chief-0:2222"], "ps": ["j-ps-0:2222"], "worker": ["j-worker-0:2222"]}

# What the program calls of TensorFlow, recording the arguments where the test reads them.
STAND_IN = """
import os

__version__ = "0-stand-in"


class train:
    @staticmethod
    def ClusterSpec(cluster):
        return ("ClusterSpec", cluster)


class distribute:
    class Server:
        def __init__(self, spec, job_name, task_index, protocol, start):
            self.target = "grpc://stand-in"
            record = repr({"spec": spec, "job_name": job_name, "task_index": task_index,
                           "protocol": protocol, "start": start})
            with open(os.environ["RECORD"] + ".tmp", "w") as f:
                f.write(record)
            os.rename(os.environ["RECORD"] + ".tmp", os.environ["RECORD"])
"""


def tf_config(task_type: str = "ps", index: int = 0, **extra: Any) -> str:
    return json.dumps({"cluster": CLUSTER, "task": {"type": task_type, "index": index}, **extra})


def run_without_tensorflow(tmp_path: Path, config: str | None, log: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"TF_CONFIG", "PYTHONPATH"}}
    if config is not None:
        env["TF_CONFIG"] = config
    return subprocess.run(
        [sys.executable, "-S", str(PROGRAM), "--termination-log", str(log)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def termination_log(tmp_path: Path) -> Path:
    """The file kubelet creates before the container starts."""
    log = tmp_path / "termination-log"
    log.write_text("")
    return log


class TestWithoutTensorFlow:
    def test_it_exits_with_the_dedicated_code(self, tmp_path: Path) -> None:
        done = run_without_tensorflow(tmp_path, tf_config(), termination_log(tmp_path))
        assert done.returncode == NO_TENSORFLOW == 78

    def test_the_termination_log_says_why_and_how_to_fix_it(self, tmp_path: Path) -> None:
        log = termination_log(tmp_path)
        run_without_tensorflow(tmp_path, tf_config(), log)
        message = log.read_text()
        assert message.startswith("this image has no TensorFlow (No module named 'tensorflow')")
        assert "use an image with TensorFlow, or give the replica a command of its own" in message

    def test_stderr_says_it_too_for_kubectl_logs(self, tmp_path: Path) -> None:
        done = run_without_tensorflow(tmp_path, tf_config(), termination_log(tmp_path))
        assert done.stderr.startswith("trainop default server: this image has no TensorFlow")

    def test_a_missing_termination_log_is_not_created(self, tmp_path: Path) -> None:
        log = tmp_path / "absent"
        assert run_without_tensorflow(tmp_path, tf_config(), log).returncode == NO_TENSORFLOW
        assert not log.exists()


class TestTFConfig:
    @pytest.mark.parametrize(
        ("config", "said"),
        [
            (None, "TF_CONFIG is not set"),
            ("{", "TF_CONFIG is not JSON"),
            (json.dumps({"cluster": CLUSTER}), "TF_CONFIG needs a 'cluster' and a 'task' object"),
            (tf_config("ps", 3), "TF_CONFIG's cluster has no ps task 3"),
        ],
    )
    def test_a_tf_config_without_this_task_is_a_usage_error_saying_what_is_missing(
        self, tmp_path: Path, config: str | None, said: str
    ) -> None:
        log = termination_log(tmp_path)
        done = run_without_tensorflow(tmp_path, config, log)
        assert done.returncode == BAD_TF_CONFIG
        assert log.read_text().startswith(said)


def start_with_stand_in(tmp_path: Path, config: str) -> tuple[subprocess.Popen[str], Path]:
    (tmp_path / "tensorflow").mkdir()
    (tmp_path / "tensorflow" / "__init__.py").write_text(STAND_IN)
    record = tmp_path / "record"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "TF_CONFIG": config, "RECORD": str(record)}
    proc = subprocess.Popen(
        [sys.executable, "-S", str(PROGRAM), "--termination-log", str(tmp_path / "absent")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert eventually(record.exists, timeout=60), proc.stderr
    return proc, record


def recorded(record: Path) -> Json:
    out: Json = ast.literal_eval(record.read_text())
    return out


class TestServer:
    def test_it_starts_the_server_of_its_task_over_grpc(self, tmp_path: Path) -> None:
        proc, record = start_with_stand_in(tmp_path, tf_config("worker", 0, environment="cloud"))
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert recorded(record) == {
            "spec": ("ClusterSpec", CLUSTER),
            "job_name": "worker",
            "task_index": 0,
            "protocol": "grpc",
            "start": True,
        }

    def test_it_serves_until_sigterm_then_exits_zero(self, tmp_path: Path) -> None:
        proc, _ = start_with_stand_in(tmp_path, tf_config())
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert out.splitlines() == [
            "trainop default server: TensorFlow 0-stand-in ps 0 serving grpc://stand-in for a cluster of "
            "1 chief, 1 ps, 1 worker",
            "trainop default server: stopping on SIGTERM",
        ]

    def test_the_rpc_layer_of_tf_config_is_the_protocol(self, tmp_path: Path) -> None:
        proc, record = start_with_stand_in(tmp_path, tf_config(rpc_layer="grpc+verbs"))
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert recorded(record)["protocol"] == "grpc+verbs"

    def test_a_sparse_cluster_names_its_tasks_by_integer_index(self, tmp_path: Path) -> None:
        sparse = {"cluster": {"worker": {"1": "j-worker-1:2222"}, "ps": ["j-ps-0:2222"]}}
        config = json.dumps({**sparse, "task": {"type": "worker", "index": 1}})
        proc, record = start_with_stand_in(tmp_path, config)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        assert recorded(record)["spec"] == (
            "ClusterSpec",
            {"worker": {1: "j-worker-1:2222"}, "ps": ["j-ps-0:2222"]},
        )
