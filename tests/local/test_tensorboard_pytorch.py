"""`trainop run --tensorboard` on the PyTorch example: every rank writes its loss and accuracy as
TensorBoard scalars into its own directory of the run, and TensorBoard's own HTTP API, at the URL the run
printed, returns those series while it keeps serving after the job (docs/tensorboard.md)."""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path

import pytest

from tests.local.tensorboards import SERVING_ON, BoardRun, api, scalars
from tests.local.test_examples import local_copy, require

EPOCHS = 60  # trainop/examples/pytorch/train.py
RANKS = ("master-0", "worker-0", "worker-1")


@pytest.fixture(scope="module")
def pytorch_board(tmp_path_factory: pytest.TempPathFactory):
    require("torch", "sklearn", "tensorboard")
    tmp_path = tmp_path_factory.mktemp("pytorch-tensorboard")
    path, _ = local_copy("pytorch", tmp_path)
    workdir = tmp_path / "run"
    run = BoardRun.start(str(path), "--workdir", str(workdir), "--timeout", "270")
    try:
        run.wait_for(SERVING_ON, timeout=300)
        yield run, workdir
    finally:
        run.proc.kill()


def test_the_job_succeeds_and_tensorboard_outlives_it(pytorch_board: tuple[BoardRun, Path]) -> None:
    run, _ = pytorch_board
    assert any("job Succeeded" in line for line in run.lines), run.lines
    assert api(run.url(), "data/environment")["data_location"].endswith("/run/tensorboard")


def test_every_rank_is_a_run_of_its_own(pytorch_board: tuple[BoardRun, Path]) -> None:
    run, workdir = pytorch_board
    assert sorted(p.name for p in (workdir / "tensorboard").iterdir()) == list(RANKS)
    scalars(run.url(), "worker-1", "test/accuracy", points=1)
    assert set(RANKS) <= set(api(run.url(), "data/plugin/scalars/tags"))


@pytest.mark.parametrize("rank", RANKS)
def test_the_api_returns_the_loss_of_every_epoch_falling(
    pytorch_board: tuple[BoardRun, Path], rank: str
) -> None:
    run, _ = pytorch_board
    series = scalars(run.url(), rank, "train/loss", points=EPOCHS)
    assert [step for _, step, _ in series] == list(range(1, EPOCHS + 1))
    losses = [value for _, _, value in series]
    assert losses[-1] < losses[0] / 5, losses


def test_the_api_returns_the_train_and_test_accuracy(pytorch_board: tuple[BoardRun, Path]) -> None:
    run, _ = pytorch_board
    train = scalars(run.url(), "master-0", "train/accuracy", points=EPOCHS)
    assert train[-1][2] > train[0][2]
    ((_, step, accuracy),) = scalars(run.url(), "master-0", "test/accuracy", points=1)
    assert step == EPOCHS and accuracy >= 0.90


def test_run_json_links_to_tensorboard(pytorch_board: tuple[BoardRun, Path]) -> None:
    run, workdir = pytorch_board
    assert json.loads((workdir / "run.json").read_text())["tensorboard"] == {"url": run.url()}


def test_ctrl_c_stops_tensorboard_and_exits_with_the_jobs_code(pytorch_board: tuple[BoardRun, Path]) -> None:
    run, _ = pytorch_board
    assert run.interrupt() == 0
    with pytest.raises(urllib.error.URLError):
        api(run.url(), "data/environment")
