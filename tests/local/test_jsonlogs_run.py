"""`trainop run --log-format json`: the examples' replicas write one JSON record per line, with the
documented fields, into their log files, and the display shows them readably (docs/json-logs.md)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.jsonlogs_lines import assert_documented, split_log
from tests.local.runs import trainop
from tests.local.test_examples import local_copy, require
from trainop.extensions.jsonlogs.extension import ANNOTATION
from trainop.jsontypes import Json


def run_json(example: str, tmp_path: Path) -> tuple[str, Path]:
    path, _ = local_copy(example, tmp_path)
    workdir = tmp_path / "run"
    done = trainop(
        str(path), "--log-format", "json", "--workdir", str(workdir), "--timeout", "270", timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done.stdout, workdir


def log_records(workdir: Path) -> dict[str, list[Json]]:
    """Every container's log file, parsed: fails on any line that is neither a JSON record nor native
    output in the documented form (tests/jsonlogs_lines.py)."""
    return {
        log.parent.name: split_log(log.read_text())[0] for log in sorted((workdir / "logs").glob("*/*.log"))
    }


@pytest.fixture(scope="module")
def pytorch_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    require("torch", "sklearn")
    return run_json("pytorch", tmp_path_factory.mktemp("pytorch"))


def test_every_line_the_pytorch_replicas_write_is_a_record_with_the_documented_fields(
    pytorch_run: tuple[str, Path],
) -> None:
    _, workdir = pytorch_run
    records = log_records(workdir)
    assert sorted(records) == [f"pytorch-dist-digits-{r}" for r in ("master-0", "worker-0", "worker-1")]
    for pod, lines in records.items():
        assert lines, pod
        for record in lines:
            assert_documented(record)
            assert (record["job"], record["namespace"], record["pod"]) == (
                "pytorch-dist-digits",
                "default",
                pod,
            )
            assert record["replica_type"] == pod.split("-")[-2]
            assert record["replica_index"] == int(pod.split("-")[-1])
            assert record["world_size"] == 3


def test_each_pytorch_replica_reports_its_own_rank(pytorch_run: tuple[str, Path]) -> None:
    _, workdir = pytorch_run
    ranks = {pod: {r["rank"] for r in lines} for pod, lines in log_records(workdir).items()}
    assert ranks == {
        "pytorch-dist-digits-master-0": {0},
        "pytorch-dist-digits-worker-0": {1},
        "pytorch-dist-digits-worker-1": {2},
    }


def test_the_display_shows_the_records_as_time_level_replica_logger_message(
    pytorch_run: tuple[str, Path],
) -> None:
    out, _ = pytorch_run
    shown = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} INFO    \[worker-1\] stdout: rank 2/3: test accuracy ", re.M)
    assert shown.search(out), out[-3000:]
    assert '{"time"' not in out


def test_the_stored_job_carries_the_annotation(pytorch_run: tuple[str, Path]) -> None:
    _, workdir = pytorch_run
    job = json.loads((workdir / "job.json").read_text())
    assert job["metadata"]["annotations"][ANNOTATION] == "json"


def test_mpi_ranks_started_by_the_launchers_mpirun_log_json_with_their_rank(tmp_path: Path) -> None:
    require("mpi4py", "sklearn")
    assert shutil.which("mpirun"), "Open MPI (mpirun) is not installed; run examples/install.sh mpi"
    _, workdir = run_json("mpi", tmp_path)
    launcher = log_records(workdir)["mpi-dist-cancer-launcher"]
    assert {r["rank"] for r in launcher} == {0, 1, 2, 3}
    assert {(r["pod"], r["replica_type"], r["world_size"]) for r in launcher} == {
        ("mpi-dist-cancer-launcher", "launcher", 4)
    }
