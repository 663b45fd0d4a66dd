"""What a local process inherits: by default only what finds programs, libraries and the locale here, and a
home of its own; the user's whole environment only when asked for; which socket folders are hidden."""

from __future__ import annotations

import os
from pathlib import Path

from trainop.local.network import loopback_network
from trainop.local.sandbox import Sandbox, hidden_folders

USER_ENV = {
    "PATH": "/venv/bin:/usr/bin",
    "VIRTUAL_ENV": "/venv",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "TMPDIR": "/var/tmp",
    "HOME": "/home/me",
    "AWS_SECRET_ACCESS_KEY": "dummy",
    "GITHUB_TOKEN": "dummy",
    "KUBECONFIG": "/home/me/.kube/config",
    "SSH_AUTH_SOCK": "/run/user/1000/agent",
}


def test_by_default_only_the_toolchain_and_locale_pass_with_a_home_in_the_run_folder(tmp_path: Path) -> None:
    env = Sandbox(USER_ENV).environment("j-worker-0", tmp_path / "home" / "j-worker-0")
    assert env == {
        "PATH": "/venv/bin:/usr/bin",
        "VIRTUAL_ENV": "/venv",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "TMPDIR": "/var/tmp",
        "HOME": str(tmp_path / "home" / "j-worker-0"),
        "HOSTNAME": "j-worker-0",
    }
    assert (tmp_path / "home" / "j-worker-0").is_dir()


def test_inherit_env_passes_everything_and_keeps_the_users_home(tmp_path: Path) -> None:
    env = Sandbox(USER_ENV, inherit_env=True).environment("j-worker-0", tmp_path / "home")
    assert env == USER_ENV
    assert not (tmp_path / "home").exists()


def test_the_socket_folders_hidden_are_run_var_run_and_the_ssh_agents(tmp_path: Path) -> None:
    agent = tmp_path / "ssh-x"
    agent.mkdir()
    hiding = hidden_folders({"SSH_AUTH_SOCK": str(agent / "agent.1")}, [tmp_path / "runs" / "j"])
    assert hiding.folders == tuple(
        dict.fromkeys([os.path.realpath("/run"), os.path.realpath("/var/run"), str(agent)])
    )
    assert hiding.kept == ()


def test_a_docker_host_socket_folder_is_hidden(tmp_path: Path) -> None:
    hiding = hidden_folders({"DOCKER_HOST": f"unix://{tmp_path}/docker.sock"}, [])
    assert str(tmp_path) in hiding.folders


def test_a_socket_folder_holding_the_run_stays_visible_and_says_why(tmp_path: Path) -> None:
    hiding = hidden_folders({"SSH_AUTH_SOCK": str(tmp_path / "agent.1")}, [tmp_path / "runs" / "j"])
    assert str(tmp_path) not in hiding.folders
    assert hiding.kept == ((str(tmp_path), f"it holds {tmp_path / 'runs' / 'j'}"),)


def test_inherit_env_drops_the_socket_variables_when_their_folders_are_hidden(tmp_path: Path) -> None:
    network = loopback_network(hide=(str(tmp_path),))
    try:
        env = Sandbox(USER_ENV, inherit_env=True, network=network).environment("j-worker-0", tmp_path)
    finally:
        network.close()
    assert "SSH_AUTH_SOCK" not in env and env["GITHUB_TOKEN"] == "dummy"
