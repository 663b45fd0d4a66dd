"""`trainop run` and placement: every pod of a local run is on this machine, so the rules are ignored,
with one notice."""

from __future__ import annotations

from pathlib import Path

from tests.local.runs import replica, trainop, write_job

PT = "PyTorchJob"
SHOW = ["true"]


def test_placement_rules_are_ignored_with_one_notice(tmp_path: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, SHOW), Worker=replica(PT, SHOW, replicas=2))
    text = job.read_text().replace(
        "metadata:\n", "metadata:\n  annotations:\n    trainop.dev/placement.Worker: spread\n", 1
    )
    job.write_text(text)
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("trainop.dev/placement rules are ignored") == 1
