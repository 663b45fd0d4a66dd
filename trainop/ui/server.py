"""`trainop ui --cluster` served by gunicorn (settings: trainop/ui/gunicorn_conf.py).

The app, and with it the cluster's watches, is built in the worker process, after gunicorn forks it:
threads do not survive a fork. The master only checks the arguments and credentials first, so a mistake
is one line on stderr and exit status 2, not a worker that fails to boot.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from flask import Flask

# gunicorn ships no type annotations.
from gunicorn.app.base import BaseApplication  # type: ignore[import-untyped]

from trainop.ui import gunicorn_conf
from trainop.ui.settings import UiSettings


def bind_of(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Server(BaseApplication):  # type: ignore[misc]
    def __init__(
        self,
        make_app: Callable[[], Flask],
        settings: UiSettings,
        host: str,
        port: int,
        ready: Callable[[str], None],
    ) -> None:
        self.make_app = make_app
        self.bind = bind_of(host, port)
        self.ready = ready
        self.options = gunicorn_conf.settings(settings)
        super().__init__()

    def load_config(self) -> None:
        for name, value in self.options.items():
            self.cfg.set(name, value)
        self.cfg.set("bind", [self.bind])
        self.cfg.set("when_ready", self._when_ready)

    def _when_ready(self, arbiter: Any) -> None:
        # The port bound (with --port 0, the one the system chose), for the line that says where to go.
        host, port = arbiter.LISTENERS[0].sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.ready(f"http://{shown}:{port}/")

    def load(self) -> Flask:
        return self.make_app()


def serve_forever(
    make_app: Callable[[], Flask], settings: UiSettings, host: str, port: int, ready: Callable[[str], None]
) -> int:
    """Run gunicorn in this process until it is told to stop (SIGINT, SIGTERM); its exit status."""
    try:
        Server(make_app, settings, host, port, ready).run()
    except SystemExit as exc:
        return int(exc.code or 0)
    sys.stdout.flush()
    return 0
