"""Following the containers' log files and printing their new lines with a `[worker-1]` prefix.

Containers write straight into their files (no pipe through `trainop run`), so a slow terminal never
blocks training and the files are complete even if `trainop run` itself dies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Lines longer than this are printed in pieces rather than held back until a newline arrives.
MAX_PENDING = 64 * 1024


def replica_name(job_name: str, pod_name: str) -> str:
    """`mnist-worker-1` -> `worker-1`: the job name is the same on every line, so it is left out."""
    prefix = f"{job_name}-"
    return pod_name[len(prefix) :] if pod_name.startswith(prefix) else pod_name


def prefix(job_name: str, pod_name: str, container: str, default_container: str) -> str:
    replica = replica_name(job_name, pod_name)
    return f"[{replica}]" if container == default_container else f"[{replica}/{container}]"


@dataclass
class LogFollower:
    path: Path
    prefix: str
    offset: int = 0
    pending: bytes = b""

    def read(self, final: bool = False) -> list[str]:
        """Complete lines written since the last call; `final` also returns an unterminated last line."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            data = b""
        self.offset += len(data)
        self.pending += data
        *lines, self.pending = self.pending.split(b"\n")
        if self.pending and (final or len(self.pending) > MAX_PENDING):
            lines.append(self.pending)
            self.pending = b""
        return [line.decode("utf-8", "replace").rstrip("\r") for line in lines]
