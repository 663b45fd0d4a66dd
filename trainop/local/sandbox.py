"""What every process of a run starts with besides its container's own spec: the environment it inherits
and the network namespace it enters.

A pod on a cluster gets its image's environment and the variables its spec sets, nothing of the person
who applied it. Locally "the image" is this machine, so a process gets what finds programs, libraries and
the locale here (PASSED), a home of its own inside the run folder, and the container's variables, but not
the tokens, keys and cloud credentials of the shell that started `trainop run` unless --inherit-env.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from trainop.local.network import LoopbackNetwork

# Passed from trainop's own environment when set: where programs and libraries are (a venv or conda
# environment works through PATH), the locale, the time zone, and where temporary files go (kept, not
# moved into the run folder: Open MPI and others put Unix sockets there, whose paths are limited to 107
# bytes).
PASSED = ("PATH", "PYTHONPATH", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR")
PASSED_PREFIXES = ("LC_",)


def passed(name: str) -> bool:
    return name in PASSED or name.startswith(PASSED_PREFIXES)


@dataclass(frozen=True)
class Sandbox:
    user_env: Mapping[str, str]
    inherit_env: bool = False
    network: LoopbackNetwork | None = None

    def environment(self, pod: str, home: Path) -> dict[str, str]:
        """The variables every container of `pod` starts with (its own `env` is laid over them). `home`
        becomes HOME, made here, unless the user's whole environment is inherited (HOME included)."""
        if self.inherit_env:
            return dict(self.user_env)
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in self.user_env.items() if passed(k)}
        # As a container runtime sets them: HOSTNAME is the pod's name.
        env.update(HOME=str(home), HOSTNAME=pod)
        return env

    @property
    def enter(self) -> Callable[[], None] | None:
        """Run in each new process before its command: joins the run's network namespace, if it has one."""
        return self.network.enter if self.network else None
