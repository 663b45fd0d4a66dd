"""`trainop run FILE [--ui]`: `trainop run`, with the web UI served beside the run when asked."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

from trainop.local import cli as local_cli
from trainop.local.runner import EXIT_NOT_RUNNABLE, StopRequest
from trainop.ui.app import create_app
from trainop.ui.cli import DEFAULT_RUNS, serve_local
from trainop.ui.runs import Runs
from trainop.ui.settings import UiSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    local_cli.add_arguments(parser)
    parser.add_argument(
        "--ui", action="store_true", help="serve the web UI over this run (and its neighbours) on 127.0.0.1"
    )
    parser.add_argument(
        "--ui-port", type=int, default=0, metavar="N", help="the UI's port (default: any free one)"
    )


def run(args: argparse.Namespace) -> int:
    # The handlers go in first: a Ctrl-C right after the UI's address is printed stops the run too.
    stop = StopRequest()
    with local_cli.signals_to(stop):
        if args.ui:
            code = serve_ui(args)
            if code is not None:
                return code
        return local_cli.run_until(args, stop)


def serve_ui(args: argparse.Namespace) -> int | None:
    """The UI on a daemon thread, its address printed; an exit code if it cannot be served."""
    root: Path = args.workdir.parent if args.workdir else DEFAULT_RUNS
    try:
        server, url = serve_local(create_app(Runs(root), UiSettings()), "127.0.0.1", args.ui_port)
    except OSError as exc:
        print(f"error: --ui-port {args.ui_port}: {exc}", file=sys.stderr)
        return EXIT_NOT_RUNNABLE
    threading.Thread(target=server.serve_forever, name="ui", daemon=True).start()
    print(
        f"trainop: web UI at {url} while the run lasts; afterwards: trainop ui {root} "
        "(which prints an address with a token of its own)",
        file=sys.stderr,
        flush=True,
    )
    return None
