"""What JSON logs cost a Python process: a printed line, a logging call and the interpreter's start-up,
each with the JSON-logs sitecustomize first on PYTHONPATH (as a job's containers have it) and without.

    python bench/jsonlogs_bench.py [--lines N] [--rounds N]

Each case runs in a fresh interpreter writing to a pipe that is drained (as a container runtime drains
a container's output); the figure is the fastest of the rounds. Targets (docs/json-logs.md): a record
<= 50 us, next to the milliseconds a training step takes; start-up <= 30 ms extra, next to the ~1 s a
training process takes to import its framework.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainop.extensions.jsonlogs import MODULE, sitecustomize_source

RECORD_TARGET_US = 50.0
STARTUP_TARGET_MS = 30.0
IDENTITY = {
    "TRAINOP_JOB_NAME": "digits",
    "TRAINOP_NAMESPACE": "team-a",
    "TRAINOP_POD_NAME": "digits-worker-1",
    "TRAINOP_NODE_NAME": "node-3",
    "TRAINOP_REPLICA_TYPE": "worker",
    "TRAINOP_REPLICA_INDEX": "1",
    "RANK": "2",
    "WORLD_SIZE": "3",
}
PROGRAMS = {
    "print()": "for i in range({n}): print('epoch', i, 'loss', 0.25)",
    "logging.warning()": "import logging\nlog = logging.getLogger('train')\n"
    "for i in range({n}): log.warning('epoch %d loss %.2f', i, 0.25)",
}


def seconds(program: str, folder: Path | None) -> float:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **IDENTITY}
    if folder is not None:
        env["PYTHONPATH"] = str(folder)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", program], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)  # fmt: skip
    return time.perf_counter() - began


def import_ms(folder: Path) -> float:
    """What importing the module (and what it imports) adds to start-up, as `-X importtime` reports it:
    the difference of two whole start-ups is lost in a shared machine's noise."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(folder), **IDENTITY}
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    (line,) = [x for x in done.stderr.splitlines() if x.split("|")[-1].strip() == "sitecustomize"]
    return int(line.split("|")[1]) / 1000


def fastest(program: str, folder: Path | None, rounds: int) -> float:
    # On a shared machine the fastest round is the one least disturbed by others.
    return min(seconds(program, folder) for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / MODULE).write_text(sitecustomize_source())
        start_plain = fastest("pass", None, args.rounds * 4)
        start_json = fastest("pass", folder, args.rounds * 4)
        extra = min(import_ms(folder) for _ in range(args.rounds * 4))
        rows = [("interpreter start-up, extra (importing the module)", extra, "ms", STARTUP_TARGET_MS)]
        for label, template in PROGRAMS.items():
            program = template.format(n=args.lines)
            plain = fastest(program, None, args.rounds) - start_plain
            json_logs = fastest(program, folder, args.rounds) - start_json
            rows.append((f"{label} as a record", json_logs / args.lines * 1e6, "us", RECORD_TARGET_US))
            rows.append((f"{label} without JSON logs", plain / args.lines * 1e6, "us", RECORD_TARGET_US))
    print(f"| Case ({args.lines} lines, fastest of {args.rounds}) | per line / process | / target |")
    print("| --- | --- | --- |")
    for label, value, unit, target in rows:
        print(f"| {label} | {value:.1f} {unit} | {value / target:.2f} |")


if __name__ == "__main__":
    main()
