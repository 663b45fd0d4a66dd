"""torchrun under JSON logs: its agent and the workers it starts are Python processes that inherit the
environment, so each writes records, the workers with the rank torchrun gave them (docs/json-logs.md,
"Child processes"). The module is mounted as the cluster mounts it: a folder first on PYTHONPATH."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.jsonlogs_lines import assert_documented, split_log
from tests.local.test_examples import require
from trainop.extensions.jsonlogs import MODULE, sitecustomize_source
from trainop.jsontypes import Json

IDENTITY = {
    "TRAINOP_JOB_NAME": "digits",
    "TRAINOP_NAMESPACE": "team-a",
    "TRAINOP_POD_NAME": "digits-master-0",
    "TRAINOP_NODE_NAME": "node-1",
    "TRAINOP_REPLICA_TYPE": "master",
    "TRAINOP_REPLICA_INDEX": "0",
}
PROGRAM = """
    import os
    print(f"worker {os.environ['RANK']} of {os.environ['WORLD_SIZE']}")
"""


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory: pytest.TempPathFactory) -> list[Json]:
    require("torch")
    folder = tmp_path_factory.mktemp("torchrun")
    (folder / "jsonlogs").mkdir()
    (folder / "jsonlogs" / MODULE).write_text(sitecustomize_source())
    (folder / "train.py").write_text(textwrap.dedent(PROGRAM))
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "train.py"],
        env={
            "PYTHONPATH": str(folder / "jsonlogs"),
            "PATH": "/usr/bin:/bin",
            "HOME": str(folder),
            **IDENTITY,
        },
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    records = []
    for stream in (done.stdout, done.stderr):
        parsed, _ = split_log(stream)
        records += parsed
    return records


def test_every_line_torchrun_and_its_workers_write_is_a_record(torchrun: list[Json]) -> None:
    assert torchrun
    for record in torchrun:
        assert_documented(record)
        assert (record["job"], record["pod"], record["replica_index"]) == ("digits", "digits-master-0", 0)


def test_each_worker_torchrun_starts_logs_with_the_rank_it_was_given(torchrun: list[Json]) -> None:
    printed = {
        (r["message"], r["rank"], r["local_rank"], r["world_size"])
        for r in torchrun
        if r["logger"] == "stdout"
    }
    assert printed == {("worker 0 of 2", 0, 0, 2), ("worker 1 of 2", 1, 1, 2)}
