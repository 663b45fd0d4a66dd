"""`trainop run` hands out this machine's accelerators like a device plugin, with a fake inventory.

TRAINOP_LOCAL_DEVICES replaces detection, so these run on a machine without GPUs; each container
prints the devices it may see.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.local.runs import replica, trainop, write_job

PT = "PyTorchJob"
SHOW = ["sh", "-c", 'echo "sees [$CUDA_VISIBLE_DEVICES]"']


def gpus(count: int) -> dict[str, dict[str, str]]:
    return {"limits": {"nvidia.com/gpu": str(count)}}


@pytest.fixture(autouse=True)
def four_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINOP_LOCAL_DEVICES", "nvidia.com/gpu=4")


def test_a_master_and_three_workers_of_one_gpu_each_get_four_distinct_gpus(tmp_path: Path) -> None:
    job = write_job(
        tmp_path,
        PT,
        Master=replica(PT, SHOW, resources=gpus(1)),
        Worker=replica(PT, SHOW, replicas=3, resources=gpus(1)),
    )
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    seen = re.findall(r"^\[(master-0|worker-\d)\] sees \[(\d)\]$", result.stdout, re.M)
    assert len(seen) == 4, result.stdout
    assert sorted(device for _, device in seen) == ["0", "1", "2", "3"]


def test_a_pod_without_a_gpu_request_sees_none(tmp_path: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, SHOW))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[master-0] sees []" in result.stdout


def test_a_pod_asking_for_more_than_the_machine_has_stays_pending_with_the_reason(tmp_path: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, SHOW, resources=gpus(5)))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), "--timeout", "5", timeout=60)
    assert result.returncode == 124, result.stdout + result.stderr
    assert (
        "Pending: 0/1 nodes are available: Insufficient nvidia.com/gpu "
        "(asks for 5; this machine has 4, 0 held by other pods of the run)"
    ) in result.stdout
    assert "sees" not in result.stdout


def test_the_fifth_pod_waits_until_a_gpu_is_released(tmp_path: Path) -> None:
    job = write_job(
        tmp_path,
        PT,
        Master=replica(PT, SHOW, resources=gpus(1)),
        Worker=replica(PT, SHOW, replicas=4, resources=gpus(1)),
    )
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Pending: 0/1 nodes are available: Insufficient nvidia.com/gpu" in result.stdout
    assert len(re.findall(r"^\[(?:master-0|worker-\d)\] sees \[\d\]$", result.stdout, re.M)) == 5
