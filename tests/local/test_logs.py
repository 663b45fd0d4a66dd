"""Log lines reach the terminal whole, prefixed with the replica they came from."""

from __future__ import annotations

from pathlib import Path

from trainop.local.display import Row, table
from trainop.local.logs import LogFollower, prefix


def test_prefixes_name_the_replica_and_only_other_containers() -> None:
    assert prefix("mnist", "mnist-worker-1", "pytorch", "pytorch") == "[worker-1]"
    assert prefix("mnist", "mnist-master-0", "sidecar", "pytorch") == "[master-0/sidecar]"
    assert prefix("hvd", "hvd-launcher", "mpi", "mpi") == "[launcher]"


def test_only_complete_lines_are_returned_until_the_end(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    follower = LogFollower(log, "[w]")
    assert follower.read() == []
    log.write_bytes(b"one\ntw")
    assert follower.read() == ["one"]
    with log.open("ab") as f:
        f.write(b"o\r\nthr")
    assert follower.read() == ["two"]
    assert follower.read(final=True) == ["thr"]


def test_the_status_table_lines_up_its_columns() -> None:
    rows = [Row("master-0", "Running", 0, 75.0), Row("worker-10", "Failed (exit 1)", 2, 3600.0)]
    assert table(rows, "PyTorchJob j: Running") == [
        "REPLICA    STATE            RESTARTS  ELAPSED",
        "master-0   Running          0         1:15",
        "worker-10  Failed (exit 1)  2         1:00:00",
        "PyTorchJob j: Running",
    ]
