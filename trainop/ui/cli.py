"""`trainop ui [RUNS_DIR]`: serve the web UI over the runs of `trainop run`, or over a cluster (--cluster)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask
from werkzeug.serving import ThreadedWSGIServer

from trainop.envvalues import Text
from trainop.kubeclient import connect
from trainop.local.fetch import is_loopback_host
from trainop.ui.app import create_app
from trainop.ui.auth import MODES, PROXY_SECRET_ENV, PROXY_SECRET_HEADER, AuthSettings, check_settings
from trainop.ui.cluster import cluster_source
from trainop.ui.links import load_links
from trainop.ui.local_access import guard, new_access
from trainop.ui.runs import Runs
from trainop.ui.server import serve_forever
from trainop.ui.settings import TENSORBOARD_URL, UiSettings

DEFAULT_RUNS = Path("trainop-runs")
# Open connections served at once by the local server; past this a new one gets a 503 at once instead
# of a thread. (A cluster's UI is served by gunicorn: trainop/ui/gunicorn_conf.py.)
MAX_CONNECTIONS = 128
# The secret the authenticating proxy sends (--auth proxy): from the environment, never an argument a
# process listing shows.
PROXY_SECRET = Text(PROXY_SECRET_ENV, "")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="?",
        type=Path,
        default=DEFAULT_RUNS,
        metavar="RUNS_DIR",
        help="the folder of `trainop run`'s runs to browse (default: ./trainop-runs)",
    )
    add_server_arguments(parser)
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="serve the cluster of TRAINOP_KUBECONFIG (or the pod's ServiceAccount) instead of local runs",
    )
    parser.add_argument(
        "--tensorboard-url",
        default=TENSORBOARD_URL,
        metavar="TEMPLATE",
        help="with --cluster: where a job's TensorBoard is, with ${metadata.namespace}-style fields "
        f"(default {TENSORBOARD_URL}, the path it serves under, on this host: for an "
        "Ingress in front of both); '' shows no TensorBoard link",
    )
    parser.add_argument("--auth", choices=MODES, default="none", help="how users sign in (default: none)")
    parser.add_argument(
        "--user-header", default="X-Forwarded-User", help="with --auth proxy: the header naming the user"
    )
    parser.add_argument("--groups-header", default="", help="with --auth proxy: the header listing groups")
    parser.add_argument(
        "--proxy-secret-header",
        default=PROXY_SECRET_HEADER,
        help=f"with --auth proxy: the header carrying the secret shared with the proxy, whose value is "
        f"{PROXY_SECRET_ENV} (default {PROXY_SECRET_HEADER})",
    )
    parser.add_argument(
        "--impersonate-groups",
        default="",
        metavar="GROUP,...",
        help="with --auth proxy: the groups of the groups header the UI acts with (others are left out; "
        "never a system: group); the UI's RBAC must allow impersonating exactly these",
    )
    parser.add_argument(
        "--secure-cookies",
        action="store_true",
        help="mark cookies Secure on every answer (without it: when the request came over https, or "
        "X-Forwarded-Proto says so); set it behind a proxy that terminates TLS",
    )


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port to listen on, 0 for any (default: 8080)")
    parser.add_argument(
        "--writable",
        action="store_true",
        help="allow actions (stop, delete, suspend, resume) and creating jobs; read-only without it "
        "(over local runs, still only for whoever opens the address with the token it prints)",
    )
    parser.add_argument("--links", type=Path, metavar="FILE", help="a YAML list of links: name, scope, url")


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> UiSettings:
    """The UI server's settings: its options, and the environment's (UiSettings.with_env)."""
    groups = tuple(g.strip() for g in getattr(args, "impersonate_groups", "").split(",") if g.strip())
    auth = AuthSettings(
        getattr(args, "auth", "none"),
        getattr(args, "user_header", "X-Forwarded-User"),
        getattr(args, "groups_header", ""),
        proxy_secret_header=getattr(args, "proxy_secret_header", PROXY_SECRET_HEADER),
        proxy_secret=PROXY_SECRET.read(environ),
        groups=groups,
        secure_cookies=getattr(args, "secure_cookies", False),
    )
    check_settings(auth)
    if auth.mode == "none" and not is_loopback_host(args.host):
        raise ValueError(
            f"--host {args.host}: without sign-in (--auth none) the UI listens only on this machine "
            "(127.0.0.1); choose --auth proxy or --auth token to serve other machines"
        )
    links = tuple(load_links(args.links)) if args.links else ()
    tensorboard = getattr(args, "tensorboard_url", TENSORBOARD_URL)
    if tensorboard and not tensorboard.startswith(("http://", "https://", "/")):
        raise ValueError(
            f"--tensorboard-url {tensorboard}: an http(s) URL or a path, e.g. "
            "https://tensorboard.example/${metadata.namespace}/${metadata.name}/, or '' for no link"
        )
    options = UiSettings(writable=args.writable, auth=auth, links=links, tensorboard_url=tensorboard)
    return options.with_env(environ)


class BoundedServer(ThreadedWSGIServer):
    """werkzeug's threaded server with a bound on the threads: one per open connection.

    It serves local runs: `trainop run --ui` runs it in a thread of the run's own process, beside the
    pods it supervises, which gunicorn (a master that forks its workers and owns the process's signals)
    cannot do; and on 127.0.0.1 for one person, werkzeug's bound is enough."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            try:
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            finally:
                self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def serve(app: Flask, host: str, port: int) -> BoundedServer:
    """The server, bound and ready; call `serve_forever()` on it (in a thread, beside a run)."""
    return BoundedServer(host, port, app)


def serve_local(app: Flask, host: str, port: int) -> tuple[BoundedServer, str]:
    """The server of the local UI, bound, with its gate (trainop.ui.local_access), and the address with
    its token to print."""
    server = serve(app, host, port)
    access = new_access(host, server.server_port)
    guard(app, access)
    return server, access.url(url_of(server))


def url_of(server: BoundedServer) -> str:
    host, port = server.server_address[:2]
    name = host.decode() if isinstance(host, bytes) else str(host)
    shown = f"[{name}]" if ":" in name else name
    return f"http://{shown}:{port}/"


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args, os.environ)
        if args.cluster:
            return _serve_cluster(args, settings)
        server, url = serve_local(create_app(Runs(args.runs), settings), args.host, args.port)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.runs.is_dir():
        # Served anyway (a run started later appears in the list), but an empty list must not look like
        # a folder without runs when the folder was mistyped.
        print(
            f"trainop ui: warning: {args.runs} is not a folder (yet): the list stays empty until a run is "
            "there; `trainop run example:pytorch` keeps its runs in ./trainop-runs",
            file=sys.stderr,
            flush=True,
        )
    _say_serving(f"the runs in {args.runs}", url, settings)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _serve_cluster(args: argparse.Namespace, settings: UiSettings) -> int:
    """With gunicorn, as in the chart's Deployment: the bounds a UI that serves many users needs."""
    connect(settings.kubeconfig)  # no credentials: say so here, not from a worker that fails to boot

    def make_app() -> Flask:
        source, authenticator = cluster_source(settings.kubeconfig, settings.auth)
        return create_app(source, settings, authenticator)

    return serve_forever(
        make_app, settings, args.host, args.port, lambda url: _say_serving("the cluster", url, settings)
    )


def _say_serving(where: str, url: str, settings: UiSettings) -> None:
    mode = "writable" if settings.writable else "read-only"
    print(f"trainop ui: serving {where} at {url} ({mode})", flush=True)
