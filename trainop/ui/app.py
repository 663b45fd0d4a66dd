"""The web app: its factory, which joins the pages' blueprints (trainop.ui.views) to one source of jobs.

Pages are rendered on the server and work without JavaScript; htmx (vendored in static/) swaps the list
when a filter changes and checks the wizard on every change; server-sent events (trainop.ui.sse) update
the list's cells and a job's page in place and follow logs.
"""

from __future__ import annotations

import secrets
from functools import partial
from pathlib import Path
from typing import Any

from flask import Flask, Response, g, render_template, request
from flask.sessions import SecureCookieSessionInterface

from trainop.jsontypes import Json
from trainop.local.logs import replica_name
from trainop.ui.auth import Authenticator, csrf_token, secure_request
from trainop.ui.scheduling import why_pending
from trainop.ui.settings import UiSettings
from trainop.ui.source import BadKey, Source, User
from trainop.ui.sse import Streams
from trainop.ui.views.auth import auth
from trainop.ui.views.context import EXTENSION, Ui, now, ui
from trainop.ui.views.job import job
from trainop.ui.views.jobs import jobs
from trainop.ui.views.logs import logs
from trainop.ui.views.shown import age, job_links, links_of, row_id
from trainop.ui.views.wizard import wizard

HERE = Path(__file__).parent
CSP = "; ".join(
    (
        "default-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "frame-ancestors 'none'",
    )
)


class SessionCookies(SecureCookieSessionInterface):
    """flask's signed session cookie (it holds the CSRF token), Secure by the same rule as the sign-in
    cookie (trainop.ui.auth.secure_request) instead of one fixed setting."""

    def __init__(self, always_secure: bool) -> None:
        self.always_secure = always_secure

    def get_cookie_secure(self, app: Flask) -> bool:
        return secure_request(request, self.always_secure)


def create_app(source: Source, settings: UiSettings, authenticator: Authenticator | None = None) -> Flask:
    app = Flask(__name__, static_folder=str(HERE / "static"), template_folder=str(HERE / "templates"))
    app.secret_key = secrets.token_bytes(32)
    app.config.update(SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_HTTPONLY=True)
    app.session_interface = SessionCookies(settings.auth.secure_cookies)
    # Without sign-in there is one user: only the pool bounds their streams.
    per_user = settings.max_user_streams if settings.auth.mode != "none" else None
    app.extensions[EXTENSION] = Ui(
        source,
        settings,
        authenticator or Authenticator(settings.auth),
        Streams(settings.max_streams, per_user, settings.stream_seconds),
    )
    app.jinja_env.globals.update(age=age, row_id=row_id, why_pending=why_pending)
    app.context_processor(common)
    app.after_request(headers)
    app.add_url_rule("/healthz", "healthz", healthz)
    for blueprint in (auth, jobs, job, logs, wizard):
        app.register_blueprint(blueprint)
    app.register_error_handler(403, forbidden)
    app.register_error_handler(404, not_found)
    app.register_error_handler(BadKey, bad_key)
    return app


def common() -> Json:
    """What every template may use."""
    this = ui()
    return {
        "settings": this.settings,
        "csrf": csrf_token(),
        "user": getattr(g, "user", User()),
        "age": age,
        "now": now(),
        "row_id": row_id,
        "replica_name": replica_name,
        "job_links": partial(job_links, this),
        "links_of": partial(links_of, this),
    }


def headers(response: Response) -> Response:
    # No other origin's script or frame: the only JavaScript is the package's own static files.
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    return response


def healthz() -> Any:
    return {"ok": True}


def forbidden(exc: Any) -> Any:
    return render_template("error.html", code=403, message=exc.description), 403


def not_found(exc: Any) -> Any:
    return render_template("error.html", code=404, message="no such job (or you may not see it)"), 404


def bad_key(exc: BadKey) -> Any:
    return render_template("error.html", code=404, message=f"no such job: {exc}"), 404
