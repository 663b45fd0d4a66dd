"""`trainop run --tensorboard` (docs/tensorboard.md): every pod gets a directory of its own in the run's
folder as TENSORBOARD_LOG_DIR, TensorBoard serves that folder on a free loopback port whose URL the run
prints and records, keeps serving after the job until Ctrl-C, and a run that cannot have it is refused
before anything starts."""

from __future__ import annotations

import json
import sys
import urllib.error
from pathlib import Path

import pytest
import yaml

from tests.local.helpers import eventually, new_tag, pids_tagged
from tests.local.runs import replica, trainop, write_job
from tests.local.tensorboards import SERVING_ON, BoardRun, api
from trainop import cli
from trainop.extensions.tensorboard import ANNOTATION, INGRESS_FROM_ENV

PT = "PyTorchJob"
# Each pod writes where it was told to into the directory it was given.
RECORD_DIR = [
    sys.executable,
    "-c",
    "import os, pathlib; d = pathlib.Path(os.environ['TENSORBOARD_LOG_DIR']); d.mkdir(parents=True); "
    "(d / 'told').write_text(str(d))",
]


def pytorch_job(folder: Path, command: list[str], annotations: dict[str, str] | None = None) -> Path:
    path = write_job(folder, PT, Master=replica(PT, command), Worker=replica(PT, command, replicas=2))
    if annotations:
        job = yaml.safe_load(path.read_text())
        job["metadata"]["annotations"] = annotations
        path.write_text(yaml.safe_dump(job))
    return path


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory):
    tmp_path = tmp_path_factory.mktemp("finished")
    run = BoardRun.start(str(pytorch_job(tmp_path, RECORD_DIR)), "--workdir", str(tmp_path / "run"))
    try:
        run.wait_for(SERVING_ON, timeout=120)
        yield run, tmp_path / "run"
    finally:
        run.proc.kill()


def test_every_pod_writes_into_a_directory_of_its_own_in_the_run_folder(
    finished_run: tuple[BoardRun, Path],
) -> None:
    _, workdir = finished_run
    root = (workdir / "tensorboard").resolve()
    told = {p.parent.name: p.read_text() for p in root.glob("*/told")}
    assert told == {name: str(root / name) for name in ("master-0", "worker-0", "worker-1")}


def test_tensorboard_serves_the_run_folder_at_the_printed_url(finished_run: tuple[BoardRun, Path]) -> None:
    run, workdir = finished_run
    assert run.url().startswith("http://127.0.0.1:")
    environment = api(run.url(), "data/environment")
    assert environment["data_location"] == str((workdir / "tensorboard").resolve())


def test_run_json_records_the_url(finished_run: tuple[BoardRun, Path]) -> None:
    run, workdir = finished_run
    assert json.loads((workdir / "run.json").read_text())["tensorboard"] == {"url": run.url()}


def test_after_the_job_tensorboard_serves_until_ctrl_c_then_the_run_exits_with_the_jobs_code(
    finished_run: tuple[BoardRun, Path],
) -> None:
    run, _ = finished_run
    assert any("job Succeeded" in line for line in run.lines)
    assert run.interrupt() == 0
    with pytest.raises(urllib.error.URLError):
        api(run.url(), "data/environment")


def test_ctrl_c_during_the_job_stops_tensorboard_with_it(tmp_path: Path) -> None:
    tag = new_tag()
    job = pytorch_job(tmp_path, [sys.executable, "-c", "import time; time.sleep(600)", tag])
    run = BoardRun.start(str(job), "--workdir", str(tmp_path / "run"), "--grace-period", "1")
    try:
        run.wait_for("TensorBoard: http", timeout=120)
        assert eventually(lambda: len(pids_tagged(tag)) == 3, timeout=60)
        assert run.interrupt() == 130
    finally:
        run.proc.kill()
    with pytest.raises(urllib.error.URLError):
        api(run.url(), "data/environment")
    assert pids_tagged(tag) == []


def test_without_the_flag_the_pods_get_no_log_directory(tmp_path: Path) -> None:
    check = [sys.executable, "-c", "import os, sys; sys.exit('TENSORBOARD_LOG_DIR' in os.environ)"]
    done = trainop(str(pytorch_job(tmp_path, check)), "--workdir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TensorBoard" not in done.stdout
    assert "tensorboard" not in json.loads((tmp_path / "run" / "run.json").read_text())


def test_a_pvc_directory_is_refused_before_anything_starts(tmp_path: Path) -> None:
    job = pytorch_job(tmp_path, RECORD_DIR, {ANNOTATION: "pvc://logs/run-7"})
    done = trainop(str(job), "--tensorboard", "--workdir", str(tmp_path / "run"))
    assert done.returncode == 2
    assert f"metadata.annotations[{ANNOTATION}]" in done.stderr
    assert "remove the annotation for a local run" in done.stderr
    assert not (tmp_path / "run").exists()


def test_without_tensorboard_installed_the_run_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # importlib finds no module whose sys.modules entry is None: as if it were not installed.
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    job = pytorch_job(tmp_path, RECORD_DIR)
    assert cli.main(["run", str(job), "--tensorboard", "--workdir", str(tmp_path / "run")]) == 2
    assert "pip install tensorboard" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_run_of_an_annotated_job_says_its_board_and_policy_are_cluster_objects(tmp_path: Path) -> None:
    job = pytorch_job(tmp_path, ["true"], {ANNOTATION: "s3://experiments/run-7"})
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("TensorBoard Deployment and NetworkPolicy are cluster objects") == 1


def test_a_malformed_ingress_setting_refuses_the_run_as_the_servers_refuse_to_start(tmp_path: Path) -> None:
    job = pytorch_job(tmp_path, ["true"], {ANNOTATION: "s3://experiments/run-7"})
    result = trainop(
        str(job), "--workdir", str(tmp_path / "run"), extra_env={INGRESS_FROM_ENV: "ingress-nginx"}
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {INGRESS_FROM_ENV}: expected a JSON list of NetworkPolicyPeers")
    assert not (tmp_path / "run").exists()
