"""What every process of a run starts with besides its container's own spec: the environment it inherits,
the network namespace it enters, and the folders of Unix sockets its mount namespace hides.

A pod on a cluster gets its image's environment and the variables its spec sets, nothing of the person
who applied it. Locally "the image" is this machine, so a process gets what finds programs, libraries and
the locale here (PASSED), a home of its own inside the run folder, and the container's variables, but not
the tokens, keys and cloud credentials of the shell that started `trainop run` unless --inherit-env.
Nor does it get this machine's Unix sockets: the Docker daemon's and the ssh agent's act for whoever
connects, with the rights of the user (or root) behind them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from trainop.local.network import LoopbackNetwork

# Passed from trainop's own environment when set: where programs and libraries are (a venv or conda
# environment works through PATH), the locale, the time zone, and where temporary files go (kept, not
# moved into the run folder: Open MPI and others put Unix sockets there, whose paths are limited to 107
# bytes).
PASSED = ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR")
PASSED_PREFIXES = ("LC_",)


# Where this machine's daemons and the session's agents put their sockets (docker.sock, containerd, dbus,
# systemd, /run/user/UID with gpg's and ssh's agents); /var/run is /run on most systems.
SOCKET_FOLDERS = ("/run", "/var/run")
# Variables that name a socket (or a daemon's address): the socket's folder is hidden too, and the variable
# is not passed on even with --inherit-env, since what it names is out of reach; a container's own `env`
# may still set it.
SOCKET_VARIABLES = (
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "GPG_AGENT_INFO",
)


def passed(name: str) -> bool:
    return name in PASSED or name.startswith(PASSED_PREFIXES)


@dataclass(frozen=True)
class Hiding:
    """The folders a run's mount namespace shows empty, and those left visible with the reason."""

    folders: tuple[str, ...]
    kept: tuple[tuple[str, str], ...]


def hidden_folders(environ: Mapping[str, str], needed: Iterable[Path]) -> Hiding:
    """SOCKET_FOLDERS and the folder of each socket `environ` names, symlinks resolved, that exist; a
    folder holding one of `needed` (the run folder, TMPDIR, the working directory) stays visible, since
    the run could not work without it."""
    named = [environ.get("SSH_AUTH_SOCK", "")]
    docker = environ.get("DOCKER_HOST", "")
    if docker.startswith("unix://"):
        named.append(docker.removeprefix("unix://"))
    candidates = [*SOCKET_FOLDERS, *(os.path.dirname(path) for path in named if path.startswith("/"))]
    wanted = [Path(os.path.realpath(path)) for path in needed]
    folders: list[str] = []
    kept: list[tuple[str, str]] = []
    for candidate in candidates:
        folder = os.path.realpath(candidate)
        if folder in folders or any(folder == k for k, _ in kept) or not os.path.isdir(folder):
            continue
        holding = [str(w) for w in wanted if w.is_relative_to(folder)]
        if folder == "/" or holding:
            kept.append((folder, f"it holds {holding[0] if holding else 'everything'}"))
        else:
            folders.append(folder)
    return Hiding(tuple(folders), tuple(kept))


@dataclass(frozen=True)
class Sandbox:
    user_env: Mapping[str, str]
    inherit_env: bool = False
    network: LoopbackNetwork | None = None

    def environment(self, pod: str, home: Path) -> dict[str, str]:
        """The variables every container of `pod` starts with (its own `env` is laid over them). `home`
        becomes HOME, made here, unless the user's whole environment is inherited (HOME included)."""
        if self.inherit_env:
            hiding = self.network is not None and bool(self.network.hidden)
            return {k: v for k, v in self.user_env.items() if not (hiding and k in SOCKET_VARIABLES)}
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in self.user_env.items() if passed(k)}
        # As a container runtime sets them: HOSTNAME is the pod's name.
        env.update(HOME=str(home), HOSTNAME=pod)
        return env

    @property
    def enter(self) -> Callable[[], None] | None:
        """Run in each new process before its command: joins the run's namespaces, if it has them."""
        return self.network.enter if self.network else None
