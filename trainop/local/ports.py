"""A free loopback port for every replica, so replicas that share this machine's network do not collide."""

from __future__ import annotations

import socket
from contextlib import ExitStack

from trainop.api.kinds import KindInfo
from trainop.jsontypes import Json


def replica_slots(info: KindInfo, job: Json) -> list[tuple[str, int]]:
    """(canonical replica type, index) of every pod a defaulted job has."""
    specs = (job.get("spec") or {}).get(info.replica_field) or {}
    slots: list[tuple[str, int]] = []
    for key, spec in specs.items():
        rtype = info.canonical_type(key)
        count = spec.get("replicas") if isinstance(spec, dict) else None
        if rtype is not None and isinstance(count, int):
            slots += [(rtype, i) for i in range(count)]
    return slots


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports the kernel says are free now (all held open together, so never repeated)."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def allocate(info: KindInfo, job: Json) -> dict[tuple[str, int], int]:
    slots = replica_slots(info, job)
    return dict(zip(slots, free_ports(len(slots)), strict=True))
