"""Log lines reach the terminal whole, prefixed with the replica they came from."""

from __future__ import annotations

import io
import json
from pathlib import Path

from trainop.local.display import LiveDisplay, PlainDisplay, Row, table
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


RECORD = {
    "time": "2026-12-01T13:45:12.345Z",
    "level": "INFO",
    "logger": "train",
    "message": "epoch 1 loss 0.25",
    "job": "mnist",
    "pod": "mnist-worker-1",
}


def plain(*lines: str) -> str:
    out = io.StringIO()
    display = PlainDisplay(out)
    for line in lines:
        display.log("[worker-1]", line)
    return out.getvalue()


def test_a_json_record_is_shown_as_time_level_replica_logger_message() -> None:
    assert plain(json.dumps(RECORD)) == "13:45:12.345 INFO    [worker-1] train: epoch 1 loss 0.25\n"


def test_a_records_traceback_is_shown_indented_under_it() -> None:
    traceback = 'Traceback (most recent call last):\n  File "train.py", line 3\nValueError: x'
    record = {**RECORD, "level": "CRITICAL", "logger": "uncaught", "message": "ValueError: x"}
    shown = plain(json.dumps({**record, "exception": {"type": "ValueError", "traceback": traceback}}))
    assert shown.splitlines() == [
        "13:45:12.345 CRITICAL [worker-1] uncaught: ValueError: x",
        "    Traceback (most recent call last):",
        '      File "train.py", line 3',
        "    ValueError: x",
    ]


def test_lines_that_are_not_records_are_shown_as_written() -> None:
    assert plain("plain text", '{"no": "level"}', "{broken") == (
        '[worker-1] plain text\n[worker-1] {"no": "level"}\n[worker-1] {broken\n'
    )


def test_a_live_display_paints_warnings_and_keeps_the_column_aligned() -> None:
    out = io.StringIO()
    display = LiveDisplay(out)
    display.log("[w]", json.dumps({**RECORD, "level": "WARNING"}))
    display.flush()
    assert (
        out.getvalue() == "13:45:12.345 \x1b[33mWARNING\x1b[0m \x1b[36m[w]\x1b[0m train: epoch 1 loss 0.25\n"
    )
