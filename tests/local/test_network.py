"""The run's network namespace: only loopback, shared by every process that enters it, and what listens
inside on every interface is out of reach of this machine's other addresses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.local.helpers import listen, non_loopback_ipv4, reaches, wait_for_port
from trainop.local.network import LoopbackNetwork, loopback_network


@pytest.fixture(params=["default", "user namespace"])
def network(request: pytest.FixtureRequest) -> Iterator[LoopbackNetwork]:
    """The namespace as this machine makes it (as root: no user namespace needed), and through a user
    namespace of our own as an unprivileged user always gets it."""
    made = loopback_network(user=True if request.param == "user namespace" else None)
    yield made
    made.close()


def inside(network: LoopbackNetwork, code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], preexec_fn=network.enter, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_namespace_has_only_loopback_and_it_is_up(network: LoopbackNetwork) -> None:
    interfaces = "import socket; print(sorted(name for _, name in socket.if_nameindex()))"
    assert inside(network, interfaces) == "['lo']"
    echo = (
        "import socket; s = socket.create_server(('127.0.0.1', 0)); "
        "c = socket.create_connection(s.getsockname()); print(c.getpeername()[0])"
    )
    assert inside(network, echo) == "127.0.0.1"


@pytest.mark.parametrize("user", [None, True], ids=["default", "user namespace"])
def test_a_hidden_folders_unix_socket_is_out_of_reach_and_the_working_directory_kept(
    tmp_path: Path, user: bool | None
) -> None:
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sockets / "daemon.sock"))
    server.listen()
    made = loopback_network(user=user, hide=(str(sockets),))
    dial = (
        "import os, socket\n"
        "try:\n"
        f"    socket.socket(socket.AF_UNIX).connect({str(sockets / 'daemon.sock')!r}); print('reached')\n"
        "except OSError as exc:\n"
        "    print(exc.strerror, os.listdir(os.environ['FOLDER']), os.getcwd())"
    )
    try:
        result = subprocess.run(
            [sys.executable, "-c", dial], preexec_fn=made.enter, cwd=tmp_path, env={"FOLDER": str(sockets)},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        made.close()
        server.close()
    assert result.stdout.strip() == f"No such file or directory [] {tmp_path}", result.stderr


def test_processes_keep_their_uid_and_gid(network: LoopbackNetwork) -> None:
    assert inside(network, "import os; print(os.getuid(), os.getgid())") == f"{os.getuid()} {os.getgid()}"


def test_a_listener_on_every_interface_is_reached_only_from_inside(
    network: LoopbackNetwork, tmp_path: Path
) -> None:
    addresses = non_loopback_ipv4()
    assert addresses, "this test needs the machine to have a non-loopback IPv4 address to probe"
    token = uuid.uuid4().hex
    server = subprocess.Popen(listen(tmp_path / "port", token), preexec_fn=network.enter)
    try:
        port = wait_for_port(tmp_path / "port")
        probe = (
            f"import socket; c = socket.create_connection(('127.0.0.1', {port})); print(c.recv(64).decode())"
        )
        assert inside(network, probe) == token
        assert {a: reaches(a, port, token) for a in addresses} == {a: False for a in addresses}
        assert not reaches("127.0.0.1", port, token)
    finally:
        server.kill()
        server.wait()


def test_without_the_namespace_the_same_listener_is_reached_from_the_machines_address(tmp_path: Path) -> None:
    # What the test above rules out, shown to be there without the namespace: the probe can fail.
    addresses = non_loopback_ipv4()
    assert addresses, "this test needs the machine to have a non-loopback IPv4 address to probe"
    token = uuid.uuid4().hex
    server = subprocess.Popen(listen(tmp_path / "port", token))
    try:
        port = wait_for_port(tmp_path / "port")
        assert reaches(addresses[0], port, token)
    finally:
        server.kill()
        server.wait()
