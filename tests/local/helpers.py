"""Shared by the local tests: the fixture replicas, finding processes by a tag in their argv, and probing
what a listener can be reached from."""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

BEHAVE = Path(__file__).parent / "fixtures" / "behave.py"
SIOCGIFADDR = 0x8915


def behave(*args: str) -> list[str]:
    return [sys.executable, str(BEHAVE), *args]


def new_tag() -> str:
    return f"trainop-test-{uuid.uuid4().hex}"


def pids_tagged(tag: str) -> list[int]:
    """Live (non-zombie) processes whose argv mentions `tag`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def eventually(check: Callable[[], bool], timeout: float = 60.0, interval: float = 0.05) -> bool:
    """Whether `check` comes true within `timeout`: what a process does (start, exit, die of a signal)
    takes the OS milliseconds, and seconds on a loaded machine; the timeout is spent only on a bug."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return check()


LISTEN = Path(__file__).parent / "fixtures" / "listen.py"


def listen(port_file: Path, token: str, port: int | str | None = None) -> list[str]:
    """A process listening on 0.0.0.0 (fixtures/listen.py): `port` or any free one, written to `port_file`."""
    return [sys.executable, str(LISTEN), str(port_file), token, *([str(port)] if port else [])]


def wait_for_port(port_file: Path) -> int:
    assert eventually(port_file.exists, timeout=60), f"{port_file} never appeared"
    return int(port_file.read_text())


def reaches(host: str, port: int, token: str) -> bool:
    """Whether a connection to host:port gets `token` back, i.e. reached that very listener."""
    try:
        with socket.create_connection((host, port), timeout=5) as conn:
            return conn.recv(len(token) + 1) == token.encode()
    except OSError:
        return False


def non_loopback_ipv4() -> list[str]:
    """This machine's IPv4 addresses other than loopback, as other machines on its networks reach it."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                answer = fcntl.ioctl(sock, SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on this interface
            address = socket.inet_ntoa(answer[20:24])
            if not address.startswith("127."):
                found.append(address)
    return found
