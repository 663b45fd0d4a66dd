"""What `trainop run` leaves for the UI: run.json while it runs and after, merged.log in print order."""

from __future__ import annotations

import json
from pathlib import Path

from trainop.local.display import PlainDisplay
from trainop.local.record import RunRecorder


class Screen(PlainDisplay):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, prefix: str, line: str) -> None:
        self.lines.append(f"{prefix} {line}")

    def event(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        return None


def test_log_lines_reach_the_screen_and_merged_log_in_the_same_order(tmp_path: Path):
    screen = Screen()
    recorder = RunRecorder(screen, tmp_path)
    recorder.log("[worker-1]", "b")
    recorder.log("[worker-0]", "a")
    recorder.flush()
    assert screen.lines == ["[worker-1] b", "[worker-0] a"]
    assert (tmp_path / "merged.log").read_text() == "[worker-1] b\n[worker-0] a\n"


def test_the_record_holds_the_job_events_and_how_the_run_ended(tmp_path: Path):
    recorder = RunRecorder(Screen(), tmp_path, every=0)
    job = {"kind": "PyTorchJob", "metadata": {"name": "a"}, "status": {}}
    recorder.attach(lambda: job, list)
    recorder.event("worker-0 created")
    recorder.flush()
    live = json.loads((tmp_path / "run.json").read_text())
    assert live["finished"] is None and live["events"][0]["message"] == "worker-0 created"
    recorder.finish(1, "job Failed: x", {**job, "status": {"conditions": []}})
    done = json.loads((tmp_path / "run.json").read_text())
    assert done["finished"]["code"] == 1 and done["job"]["status"] == {"conditions": []}
