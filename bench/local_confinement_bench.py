"""What `trainop run`'s namespaces cost (network, and mount with the socket folders hidden, as a run makes
them): making them once per run, and entering them per process.

    python bench/local_confinement_bench.py [--rounds N]

Runs in a process that has imported what `trainop run` imports, so fork copies a realistic address space.
Both modes are measured: the namespace alone (as root) and through a user namespace (any other user).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trainop.local.cli  # noqa: F401  (the size of a real `trainop run` process)
from trainop.local.network import loopback_network
from trainop.local.sandbox import hidden_folders

# Per run, next to the seconds a distributed training's processes take to start; per process, next to
# the ~200 ms a Python interpreter takes to start.
SETUP_TARGET_MS = 100.0
ENTER_TARGET_MS = 20.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spawn_ms(rounds: int, preexec: Callable[[], None] | None) -> list[float]:
    out = []
    for _ in range(rounds):
        began = time.monotonic()
        subprocess.run(["true"], preexec_fn=preexec, check=True)
        out.append((time.monotonic() - began) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    hide = hidden_folders(os.environ, [Path.cwd()]).folders
    rows = []
    for label, user in (("as root, no user namespace", False), ("through a user namespace", True)):
        setups = []
        for _ in range(rounds):
            network = loopback_network(user=user, hide=hide)
            setups.append(network.setup_seconds * 1000)
            network.close()
        rows.append((f"make it, {label}", setups, SETUP_TARGET_MS))
        network = loopback_network(user=user, hide=hide)
        plain, entered = spawn_ms(rounds, None), spawn_ms(rounds, network.enter)
        network.close()
        extra = [e - statistics.median(plain) for e in entered]
        rows.append((f"start a process in it, extra, {label}", extra, ENTER_TARGET_MS))
    print(f"hiding {', '.join(hide)}")
    print(f"| Case ({rounds} rounds) | p50 | p99 | p99 / target |")
    print("| --- | --- | --- | --- |")
    for label, values, target in rows:
        p50, p99 = statistics.median(values), percentile(values, 0.99)
        print(f"| {label} | {p50:.1f} ms | {p99:.1f} ms | {p99 / target:.2f} |")


if __name__ == "__main__":
    main()
