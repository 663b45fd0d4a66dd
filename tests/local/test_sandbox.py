"""What a local process inherits: by default only what finds programs, libraries and the locale here, and a
home of its own; the user's whole environment only when asked for."""

from __future__ import annotations

from pathlib import Path

from trainop.local.sandbox import Sandbox

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
