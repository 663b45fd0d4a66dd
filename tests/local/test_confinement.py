"""`trainop run` confined like a pod, through the real CLI: a job the apiserver would refuse writes nothing,
the user's environment stays with the user, and the replicas' listeners are out of reach of other machines."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.local.helpers import eventually, listen, non_loopback_ipv4, reaches, wait_for_port
from tests.local.runs import REPO, cli, env, replica, start, trainop, write_job

PT = "PyTorchJob"
TEMPLATE = "spec.pytorchReplicaSpecs[Master].template.spec"
SHOW_ENV = ["sh", "-c", 'echo "token=${TRAINOP_TEST_TOKEN:-unset} home=$HOME"; touch "$HOME/written"']
# Connects to the master over the addresses the operator injected and prints what the master answered.
DIAL_MASTER = [
    sys.executable,
    "-c",
    "import os, socket, time\n"
    "while True:\n"
    "    try:\n"
    "        c = socket.create_connection((os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT'])))\n"
    "        break\n"
    "    except OSError:\n"
    "        time.sleep(0.1)\n"
    "print('reached', c.recv(64).decode(), flush=True)\n"
    "time.sleep(600)\n",
]


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_job_whose_pods_the_apiserver_refuses_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    master = replica(PT, ["sh", "-c", "echo hi"])
    spec = master["template"]["spec"]
    spec["containers"].append({"name": "../../../outside/log", "image": "x", "command": ["true"]})
    items = [{"key": "a", "path": "/abs"}, {"key": "b", "path": "../x"}]
    spec["volumes"] = [
        {"name": "cfg", "configMap": {"name": "t-config", "items": items, "optional": True}},
        {"name": "../../../outside-dir", "emptyDir": {}},
    ]
    job = write_job(tmp_path, PT, Master=master)
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith(f'error: {job}: the apiserver would refuse the pods of PyTorchJob "t": ')
    for fragment in (
        f'{TEMPLATE}.volumes[0].configMap.items[0].path: Invalid value: "/abs": must be a relative path',
        f"{TEMPLATE}.volumes[0].configMap.items[1].path: Invalid value: \"../x\": must not contain '..'",
        f'{TEMPLATE}.volumes[1].name: Invalid value: "../../../outside-dir": a lowercase RFC 1123 label',
        f'{TEMPLATE}.containers[1].name: Invalid value: "../../../outside/log": a lowercase RFC 1123 label',
    ):
        assert fragment in result.stderr
    assert listing(tmp_path) == ["job.yaml"]


def test_the_users_environment_does_not_reach_the_pods_and_home_is_in_the_run_folder(tmp_path: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, SHOW_ENV))
    token = {"TRAINOP_TEST_TOKEN": "dummy-token"}
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), extra_env=token)
    assert result.returncode == 0, result.stdout + result.stderr
    home = tmp_path / "run" / "home" / "t-master-0"
    assert f"[master-0] token=unset home={home}" in result.stdout
    assert (home / "written").exists()


def test_inherit_env_gives_the_pods_the_users_whole_environment(tmp_path: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, SHOW_ENV))
    token = {"TRAINOP_TEST_TOKEN": "dummy-token", "HOME": str(tmp_path)}
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), "--inherit-env", extra_env=token)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"[master-0] token=dummy-token home={tmp_path}" in result.stdout


@pytest.mark.parametrize(("flags", "reachable"), [((), False), (("--host-network",), True)])
def test_a_replicas_listener_on_every_interface_is_out_of_reach_unless_host_network(
    tmp_path: Path, flags: tuple[str, ...], reachable: bool
) -> None:
    addresses = non_loopback_ipv4()
    assert addresses, "this test needs the machine to have a non-loopback IPv4 address to probe"
    token = uuid.uuid4().hex
    # The master listens on 0.0.0.0:MASTER_PORT, as torch's TCPStore does; the worker dials it.
    master = replica(PT, listen(tmp_path / "port", token, "$(MASTER_PORT)"))
    job = write_job(tmp_path, PT, Master=master, Worker=replica(PT, DIAL_MASTER))
    proc = start(str(job), "--workdir", str(tmp_path / "run"), "--grace-period", "1", *flags)
    try:
        port = wait_for_port(tmp_path / "port")
        worker_log = tmp_path / "run" / "logs" / "t-worker-0" / "pytorch.log"
        assert eventually(lambda: worker_log.exists() and f"reached {token}" in worker_log.read_text())
        assert {a: reaches(a, port, token) for a in addresses} == {a: reachable for a in addresses}
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, stdout


def test_where_the_machine_refuses_a_namespace_the_run_warns_why_and_goes_on(tmp_path: Path) -> None:
    # A user namespace in which no further user or network namespace may be made: a machine that forbids them.
    forbid = (
        "echo 0 > /proc/sys/user/max_user_namespaces && echo 0 > /proc/sys/user/max_net_namespaces "
        '&& exec "$@"'
    )
    job = write_job(tmp_path, PT, Master=replica(PT, ["sh", "-c", "echo trained"]))
    argv = ["unshare", "--user", "--map-root-user", "sh", "-c", forbid, "sh"]
    argv += cli(str(job), "--workdir", str(tmp_path / "run"))
    result = subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING: the replicas will share this machine's network: the kernel refused" in result.stderr
    assert "No space left on device" in result.stderr
    assert "[master-0] trained" in result.stdout


def dial_unix(path: Path) -> list[str]:
    """A container that connects to the Unix socket at `path` and says whether it could, and what
    SSH_AUTH_SOCK it got."""
    code = (
        "import os, socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        f"    s.connect({str(path)!r}); print('socket reached', flush=True)\n"
        "except OSError as exc:\n"
        "    print('socket unreachable:', exc.strerror, flush=True)\n"
        "print('SSH_AUTH_SOCK=' + os.environ.get('SSH_AUTH_SOCK', 'unset'), flush=True)\n"
    )
    return [sys.executable, "-c", code]


@pytest.fixture
def socket_in_run() -> Iterator[Path]:
    """A listening Unix socket in a folder of /run, as docker.sock is."""
    folder = Path("/run") / f"trainop-test-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "daemon.sock"))
    server.listen()
    yield folder / "daemon.sock"
    server.close()
    shutil.rmtree(folder)


@pytest.fixture
def ssh_agent(tmp_path: Path) -> Iterator[Path]:
    """A listening Unix socket where an ssh agent's is: a folder of its own outside the run."""
    folder = tmp_path / "ssh-agent"
    folder.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "agent.sock"))
    server.listen()
    yield folder / "agent.sock"
    server.close()


def test_a_pod_cannot_reach_a_unix_socket_in_run(tmp_path: Path, socket_in_run: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, dial_unix(socket_in_run)))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[master-0] socket unreachable: No such file or directory" in result.stdout


def test_the_first_lines_of_a_run_say_which_socket_folders_are_hidden(
    tmp_path: Path, ssh_agent: Path
) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, ["true"]))
    result = trainop(
        str(job), "--workdir", str(tmp_path / "run"), extra_env={"SSH_AUTH_SOCK": str(ssh_agent)}
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # /var/run too where it is a folder of its own rather than a link to /run.
    assert "they see /run, " in result.stdout
    assert f"{ssh_agent.parent} empty (this machine's sockets hidden)" in result.stdout


def test_with_host_network_a_pod_reaches_a_unix_socket_in_run(tmp_path: Path, socket_in_run: Path) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, dial_unix(socket_in_run)))
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), "--host-network")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[master-0] socket reached" in result.stdout


def test_even_with_inherit_env_a_pod_gets_no_ssh_auth_sock_and_cannot_reach_the_agent(
    tmp_path: Path, ssh_agent: Path
) -> None:
    job = write_job(tmp_path, PT, Master=replica(PT, dial_unix(ssh_agent)))
    agent = {"SSH_AUTH_SOCK": str(ssh_agent)}
    result = trainop(str(job), "--workdir", str(tmp_path / "run"), "--inherit-env", extra_env=agent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[master-0] socket unreachable: No such file or directory" in result.stdout
    assert "[master-0] SSH_AUTH_SOCK=unset" in result.stdout


def test_where_the_machine_refuses_a_mount_namespace_the_run_warns_which_sockets_are_reachable(
    tmp_path: Path,
) -> None:
    forbid = 'echo 0 > /proc/sys/user/max_mnt_namespaces && exec "$@"'
    job = write_job(tmp_path, PT, Master=replica(PT, ["sh", "-c", "echo trained"]))
    argv = ["unshare", "--user", "--map-root-user", "sh", "-c", forbid, "sh"]
    argv += cli(str(job), "--workdir", str(tmp_path / "run"))
    result = subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING: the replicas can reach this machine's Unix sockets in /run" in result.stderr
    assert "the kernel refused a mount and network namespace" in result.stderr
    assert "share this machine's network" not in result.stderr
    assert "[master-0] trained" in result.stdout
