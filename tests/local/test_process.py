"""A container is one process group: exit codes as kubelet reports them, and nothing of it outlives it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.local.helpers import behave, eventually, new_tag, pids_tagged
from trainop.local.containers import ContainerPlan
from trainop.local.process import START_ERROR_CODE, ContainerProcess, exit_code


def start(tmp_path: Path, argv: list[str]) -> ContainerProcess:
    proc = ContainerProcess(ContainerPlan("c", argv, tmp_path, {"GREETING": "hi"}), tmp_path / "c.log", {})
    proc.start()
    return proc


@pytest.mark.parametrize(
    ("returncode", "expected"),
    [(0, 0), (1, 1), (137, 137), (-signal.SIGKILL, 137), (-signal.SIGTERM, 143), (-signal.SIGINT, 130)],
)
def test_exit_codes_from_signals_are_128_plus_the_signal(returncode: int, expected: int) -> None:
    assert exit_code(returncode) == expected


def test_a_process_killed_by_sigkill_exits_137(tmp_path: Path) -> None:
    proc = start(tmp_path, behave("--signal", "KILL"))
    exit = proc.wait(30)
    assert exit is not None and (exit.code, exit.reason) == (137, "Error")


def test_output_and_errors_go_to_the_log_file_with_only_the_container_env_added(tmp_path: Path) -> None:
    proc = start(tmp_path, ["sh", "-c", 'echo "out $GREETING"; echo err >&2; exit 3'])
    exit = proc.wait(30)
    assert exit is not None and exit.code == 3
    assert (tmp_path / "c.log").read_text().splitlines() == ["out hi", "err"]


def test_a_command_that_cannot_start_is_a_start_error_in_the_log(tmp_path: Path) -> None:
    proc = start(tmp_path, ["/nonexistent/trainer"])
    assert proc.exit is not None and (proc.exit.code, proc.exit.reason) == (START_ERROR_CODE, "StartError")
    assert "/nonexistent/trainer" in (tmp_path / "c.log").read_text()


def test_what_a_container_started_dies_with_it(tmp_path: Path) -> None:
    tag = new_tag()
    proc = start(tmp_path, behave("--spawn", "--tag", tag, "--sleep", "0.5", "--exit", "0"))
    assert eventually(lambda: len(pids_tagged(tag)) == 2)
    assert proc.wait(30) is not None
    assert eventually(lambda: pids_tagged(tag) == [])


def test_terminate_signals_the_whole_group_and_kills_it_after_the_grace_period(tmp_path: Path) -> None:
    tag = new_tag()
    proc = start(tmp_path, behave("--spawn", "--ignore-term", "--sleep", "60", "--tag", tag))
    assert eventually(lambda: len(pids_tagged(tag)) == 2)
    began = time.monotonic()
    proc.terminate(grace=0.5, now=began)
    # The grandchild does not ignore SIGTERM and goes at once; the container's main process waits for KILL.
    assert eventually(lambda: len(pids_tagged(tag)) == 1)
    assert proc.poll() is None
    while proc.poll() is None:
        proc.enforce(time.monotonic())
        time.sleep(0.05)
    assert proc.exit is not None and proc.exit.code == 137
    assert time.monotonic() - began >= 0.5
    assert not proc.group_alive()
