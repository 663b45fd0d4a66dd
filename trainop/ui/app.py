"""The web app: the job list, a job's page, its logs, the creation wizard and the actions.

Pages are rendered on the server and work without JavaScript; htmx (vendored in static/) swaps the list
when a filter changes and checks the wizard on every change; server-sent events update the list's cells
and a job's page in place and follow logs. Each event stream holds a thread, so their number is bounded
(`UiSettings.max_streams`, and `max_user_streams` of them for one user) and each one ends after
`stream_seconds` (the browser reconnects by itself) or as soon as its client goes, with every read it
held open.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from flask import Flask, Response, abort, g, redirect, render_template, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from markupsafe import Markup
from werkzeug.utils import secure_filename

from trainop.envvalues import PositiveInt, Text
from trainop.extensions import EXTENSIONS, owned
from trainop.frameworks import KINDS, kind_info
from trainop.jsontypes import Json
from trainop.kubeclient import KUBECONFIG_ENV
from trainop.local.logs import replica_name
from trainop.serving import Deadlines
from trainop.ui.auth import (
    TOKEN_COOKIE,
    Authenticator,
    AuthSettings,
    Refused,
    TooManyReviews,
    Unauthenticated,
    csrf_ok,
    csrf_token,
    secure_request,
)
from trainop.ui.links import Link
from trainop.ui.scheduling import why_pending
from trainop.ui.source import BadKey, Container, Detail, Invalid, NotAllowed, Source, User
from trainop.ui.summary import PAGE_SIZES, SORT_KEYS, STATES, Query, Summary, select
from trainop.ui.timeline import timeline
from trainop.ui.wizard import (
    CLEAN_POLICIES,
    DEFAULT_KIND,
    FORM,
    RESOURCES,
    RUN_POLICY,
    Form,
    errors_by_field,
    examples_of,
    extension_choices,
    field_of,
    form_fields,
)

HERE = Path(__file__).parent
TENSORBOARD_URL = "/tensorboard/${metadata.namespace}/${metadata.name}/"
# Every event stream's path starts so: the server gives those answers the stream's lifetime to finish.
STREAM_PREFIX = "/stream/"
# What a browser holds of a followed log; older lines are dropped as new ones come (static/ui.js too).
LOG_LINES = 2000
# What a page (and a stream's first batch) shows of a log's end.
PAGE_LOG_LINES = 500
MAX_CONNECTIONS = PositiveInt("TRAINOP_UI_MAX_CONNECTIONS", 256)
MAX_USER_STREAMS = PositiveInt("TRAINOP_UI_MAX_USER_STREAMS", 16)
KUBECONFIG = Text(KUBECONFIG_ENV, "")
CSP = "; ".join(
    (
        "default-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "frame-ancestors 'none'",
    )
)


@dataclass(frozen=True)
class UiSettings:
    """The UI server's one settings object: its options (trainop.ui.cli), and with --cluster the serving
    limits and kubeconfig read from the environment once at start-up (`with_env`)."""

    writable: bool = False  # read-only unless the UI's operator allows writes
    auth: AuthSettings = field(default_factory=AuthSettings)
    links: tuple[Link, ...] = ()
    max_streams: int = 64
    # Of those, what one signed-in user may hold (TRAINOP_UI_MAX_USER_STREAMS), so one user's tabs (or
    # script) cannot take every stream from the others; without sign-in every stream is the one user's.
    max_user_streams: int = MAX_USER_STREAMS.default
    stream_seconds: float = 600.0
    poll_seconds: float = 1.0
    title: str = "trainop"
    # Where a job's TensorBoard is, over the job's fields like a link's URL; "" shows no TensorBoard link
    # (the field the TensorBoard extension's JobLink names).
    # The default is the path prefix the TensorBoard serves under, on the UI's own host: for an Ingress
    # in front of both that routes /tensorboard/ to the jobs' TensorBoard Services.
    tensorboard_url: str = TENSORBOARD_URL
    # gunicorn's (trainop/ui/gunicorn_conf.py): TRAINOP_UI_{HANDSHAKE,HEADER,BODY,RESPONSE}_TIMEOUT and
    # TRAINOP_UI_MAX_CONNECTIONS, open connections (at the cap the oldest one still sending its request,
    # else the oldest idle one, is closed for each new one).
    deadlines: Deadlines = field(default_factory=Deadlines)
    max_connections: int = MAX_CONNECTIONS.default
    # The cluster's kubeconfig (TRAINOP_KUBECONFIG) instead of the pod's ServiceAccount; "" for that.
    kubeconfig: str = ""

    def with_env(self, environ: Mapping[str, str]) -> UiSettings:
        """These settings with the values the environment sets (SettingError names a malformed one)."""
        return replace(
            self,
            deadlines=Deadlines.from_env("TRAINOP_UI", environ),
            max_connections=MAX_CONNECTIONS.read(environ),
            max_user_streams=MAX_USER_STREAMS.read(environ),
            kubeconfig=KUBECONFIG.read(environ),
        )


@dataclass(frozen=True)
class PageLinks:
    """A job page's links of a replica type (`${replica.type}` beside the job's fields) or of a pod (the
    pod's own fields, the job's under `job.`)."""

    job: Json
    expand: Callable[[Json, str], list[tuple[str, str]]]
    scopes: set[str]

    def __call__(self, scope: str, thing: Any) -> list[tuple[str, str]]:
        if scope == "replica":
            return self.expand({**self.job, "replica": {"type": thing}}, "replica")
        return self.expand({**thing, "job": self.job}, "pod")


def row_id(key: str) -> str:
    return "r" + hashlib.sha1(key.encode()).hexdigest()[:12]


def age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(max(seconds, 0))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            rest = seconds % size // (size // 60 if unit != "m" else 1)
            return f"{seconds // size}{unit}{rest}{'h' if unit == 'd' else 'm' if unit == 'h' else 's'}"
    return f"{seconds}s"


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
    auth = authenticator or Authenticator(settings.auth)
    streams = threading.BoundedSemaphore(settings.max_streams)
    held: Counter[tuple[str, tuple[str, ...], str]] = Counter()  # open streams per user
    held_lock = threading.Lock()
    app.jinja_env.globals.update(age=age, row_id=row_id, why_pending=why_pending)
    cells = app.jinja_env.get_template("cells.html")

    def now() -> datetime:
        return datetime.now(UTC)

    @app.before_request
    def who() -> Any:
        if request.endpoint in ("static", "signin", "healthz"):
            return None
        try:
            g.user = auth.user(request)
        except Unauthenticated as exc:
            return render_template("signin.html", message=str(exc), settings=settings), 401
        except Refused as exc:
            return render_template("error.html", code=403, message=str(exc)), 403
        except TooManyReviews as exc:
            page = render_template("signin.html", message=str(exc), settings=settings)
            return page, 429, {"Retry-After": str(exc.retry_after)}
        return None

    @app.context_processor
    def common() -> Json:
        return {
            "settings": settings,
            "csrf": csrf_token(),
            "user": getattr(g, "user", User()),
            "age": age,
            "now": now(),
            "row_id": row_id,
            "replica_name": replica_name,
            "job_links": job_links,
            "links_of": links_of,
        }

    def job_links(
        obj: Json, scope: str = "job", served: tuple[tuple[str, str], ...] = ()
    ) -> list[tuple[str, str]]:
        """The links of `scope` over `obj`; a job's extension links first (its TensorBoard): to what its
        source knows the address of (`served`, a local run's record), else, where the job's annotations
        make the sync serve it, through the template of the UI's settings."""
        links = [(link.name, link.expand(obj)) for link in settings.links if link.scope == scope]
        if scope != "job":
            return links
        addresses = dict(served)
        first: list[tuple[str, str]] = []
        for ext in EXTENSIONS:
            for link in ext.links:
                template = str(getattr(settings, link.setting, "") or "")
                if addresses.get(link.key):
                    first.append((link.name, addresses[link.key]))
                elif source.serves_addons and template and ext.linked(link, owned(ext, obj)):
                    first.append((link.name, Link(link.name, "job", template).expand(obj)))
        return first + links

    def links_of(job: Json) -> PageLinks:
        return PageLinks(job, job_links, {link.scope for link in settings.links})

    @app.after_request
    def headers(response: Response) -> Response:
        # No other origin's script or frame: the only JavaScript is the package's own static files.
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    @app.get("/healthz")
    def healthz() -> Any:
        return {"ok": True}

    # ---- the list -----------------------------------------------------------------------------------
    @app.get("/")
    def jobs() -> Any:
        query = Query.from_args(request.args)
        summaries = source.summaries(g.user)
        page = select(summaries, query)
        context = {
            "page": page,
            "query": query,
            "namespaces": sorted({s.namespace for s in summaries}),
            "kinds": sorted(KINDS),
            "states": STATES,
            "sorts": SORT_KEYS,
            "sizes": PAGE_SIZES,
            "args": {k: v for k, v in request.args.items() if k != "page"},
        }
        if request.headers.get("HX-Request") and request.headers.get("HX-Target") == "jobs":
            return render_template("table.html", **context)
        return render_template("list.html", **context)

    @app.get(f"{STREAM_PREFIX}list")
    def list_stream() -> Response:
        keys = request.args.getlist("key")[: max(PAGE_SIZES)]
        user = g.user
        return stream(lambda: _list_events(source, user, keys, cells, settings.poll_seconds))

    # ---- a job --------------------------------------------------------------------------------------
    def detail_or_404(key: str) -> Detail:
        try:
            found = source.detail(g.user, key)
        except NotAllowed:
            abort(403)
        if found is None:
            abort(404)
        return found

    @app.get("/job/<path:key>")
    def job(key: str) -> Any:
        detail = detail_or_404(key)
        chosen = _container(request.args.get("log", ""), detail)
        # Without JavaScript this is the log; with it, the stream starts over from the same lines.
        lines = source.read_logs(g.user, key, detail, chosen, PAGE_LOG_LINES)
        return render_template(
            "job.html",
            d=detail,
            key=key,
            s=detail.summary,
            picture=Markup(timeline(detail.job, detail.pods, now())),
            yaml_text=_yaml(detail.job),
            chosen=chosen,
            lines=lines,
            log_lines=LOG_LINES,
            actions=[a for a in source.actions if applies(a, detail) and source.may(g.user, key, a)]
            if settings.writable
            else [],
            message=request.args.get("message", ""),
        )

    @app.get(f"{STREAM_PREFIX}job/<path:key>")
    def job_stream(key: str) -> Response:
        user = g.user
        detail_or_404(key)
        parts = app.jinja_env.get_template("parts.html")
        return stream(lambda: _job_events(source.details(user, key, settings.poll_seconds), parts, links_of))

    @app.get(f"{STREAM_PREFIX}logs/<path:key>")
    def log_stream(key: str) -> Response:
        detail = detail_or_404(key)
        chosen = _container(request.args.get("log", ""), detail)
        user = g.user
        return stream(lambda: _log_events(source.follow_logs(user, key, detail, chosen, PAGE_LOG_LINES)))

    def stream(events: Callable[[], Generator[str]]) -> Response:
        user: User = g.user
        who = (user.name, user.groups, hashlib.sha256(user.token.encode()).hexdigest() if user.token else "")
        # Without sign-in there is one user: only the pool bounds them.
        signed_in = settings.auth.mode != "none"
        quota = settings.max_user_streams
        with held_lock:
            if signed_in and held[who] >= quota:
                return Response(
                    f"you have {held[who]} event streams open, the most one user may "
                    f"({quota}, TRAINOP_UI_MAX_USER_STREAMS): close other tabs of this UI\n",
                    429,
                    {"Retry-After": "5"},
                )
            if not streams.acquire(blocking=False):
                return Response("too many open streams; try again later\n", 503, {"Retry-After": "5"})
            held[who] += 1
        deadline = time.monotonic() + settings.stream_seconds

        def release() -> None:
            with held_lock:
                held[who] -= 1
                if not held[who]:
                    del held[who]
            streams.release()

        def body() -> Iterator[str]:
            # Closed by the server when the client goes (a write failed) or the stream ends: the source's
            # iterator is closed with it, which stops every poll and follow it held.
            chunks = events()
            try:
                yield "retry: 2000\n\n"
                for chunk in chunks:
                    yield chunk
                    if time.monotonic() > deadline:
                        return
            finally:
                chunks.close()
                release()

        return Response(
            body(),
            mimetype="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    # ---- writes -------------------------------------------------------------------------------------
    def writes_allowed() -> None:
        if not settings.writable:
            abort(403, "this UI is read-only")
        if not csrf_ok(request):
            abort(403, "the form is stale or not from this page (CSRF check): reload the page")

    @app.post("/action/<action>/<path:key>")
    def act(action: str, key: str) -> Any:
        writes_allowed()
        if action not in source.actions:
            abort(404)
        try:
            message = source.act(g.user, key, action)
        except NotAllowed as exc:
            abort(403, str(exc))
        except BadKey:
            raise  # a 404 that says what is wrong with the address (below), not a message on a page
        except Invalid as exc:
            message = str(exc)
        if action == "delete" and not message.startswith(("the run", "no run")):
            return redirect(url_for("jobs", message=message), 303)
        return redirect(url_for("job", key=key, message=message), 303)

    @app.route("/new", methods=["GET", "POST"])
    def wizard() -> Any:
        form = (
            Form(dict(request.form.items()))
            if request.method == "POST"
            else Form.initial(request.args.get("kind", DEFAULT_KIND), request.args.get("example", ""))
        )
        job, problems = form.job()
        # What goes with the job (an example's ConfigMap), made here from the example's name, never
        # taken from the request.
        companions = form.companions(job)
        errors = errors_by_field(job, problems)
        outcome = ""
        if request.method == "POST" and request.form.get("do") == "download":
            name = str(job["metadata"].get("name") or "job")
            headers = {"Content-Disposition": f'attachment; filename="{secure_filename(name) or "job"}.yaml"'}
            text = yaml.safe_dump_all([*companions, job], sort_keys=False)
            return Response(text, 200, headers, mimetype="application/yaml")
        if request.method == "POST" and request.form.get("do") in ("create", "dry-run") and not errors:
            writes_allowed()
            try:
                outcome = source.create(
                    g.user, job, dry_run=request.form.get("do") == "dry-run", companions=companions
                )
            except Invalid as exc:
                for path, message in exc.errors:
                    errors.setdefault(field_of(path) if path else FORM, []).append(message)
            except NotAllowed as exc:
                errors.setdefault(FORM, []).append(str(exc))
            else:
                if request.form.get("do") == "create":
                    meta = job["metadata"]
                    created = (
                        outcome
                        if source.creates == "started"
                        else f"{meta['namespace']}/{job['kind']}/{meta['name']}"
                    )
                    target = url_for("job", key=created)
                    if request.headers.get("HX-Request"):
                        return Response("", 200, {"HX-Redirect": target})
                    return redirect(target, 303)
        context = {
            "form": form,
            "info": kind_info(form.kind),
            "kinds": sorted(KINDS),
            "examples": examples_of(form.kind),
            "example": form.example,
            "companions_yaml": yaml.safe_dump_all(companions, sort_keys=False) if companions else "",
            "errors": errors,
            "yaml_text": yaml.safe_dump(job, sort_keys=False),
            "resources": RESOURCES,
            "extension_fields": extension_choices(),
            "run_policy": RUN_POLICY,
            "clean_policies": CLEAN_POLICIES,
            "outcome": outcome,
            "FORM": FORM,
            "create_label": "Start it here" if source.creates == "started" else "Create",
            # Offered only to a user who may create this kind in the form's namespace.
            "may_create": settings.writable
            and source.may(
                g.user, f"{job['metadata']['namespace']}/{job['kind']}/{job['metadata']['name']}", "create"
            ),
        }
        if request.headers.get("HX-Request") and request.form.get("do") in (None, "", "check"):
            return render_template("wizard_check.html", fields=[FORM, *form_fields(form.kind)], **context)
        return render_template("wizard.html", **context)

    @app.route("/signin", methods=["GET", "POST"])
    def signin() -> Any:
        if request.method == "GET":
            return render_template("signin.html", message="", settings=settings)
        # Without this check another site could sign a browser in as the attacker (login CSRF), and
        # whatever the victim then creates would be the attacker's to read.
        if not csrf_ok(request):
            message = "the sign-in form is stale or not from this page (CSRF check): sign in again"
            return render_template("signin.html", message=message, settings=settings), 403
        token = request.form.get("token", "").strip()
        session.pop("csrf", None)  # a new session gets a new CSRF token
        response = redirect(url_for("jobs"), 303)
        secure = secure_request(request, settings.auth.secure_cookies)
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", secure=secure)
        return response

    @app.errorhandler(403)
    def forbidden(exc: Any) -> Any:
        return render_template("error.html", code=403, message=exc.description), 403

    @app.errorhandler(404)
    def not_found(exc: Any) -> Any:
        return render_template("error.html", code=404, message="no such job (or you may not see it)"), 404

    @app.errorhandler(BadKey)
    def bad_key(exc: BadKey) -> Any:
        return render_template("error.html", code=404, message=f"no such job: {exc}"), 404

    return app


def applies(action: str, detail: Detail) -> bool:
    """Whether the job's page offers `action` now: suspend only a job that runs, resume a suspended one,
    stop a live local run; delete always (a local run still going is refused with the reason)."""
    state = detail.summary.state
    if action == "suspend":
        return state not in ("Suspended", "Succeeded", "Failed")
    if action == "resume":
        return state == "Suspended"
    if action == "stop":
        return detail.live
    return True


def _container(choice: str, detail: Detail) -> Container | None:
    for c in detail.containers:
        if f"{c.pod}/{c.name}" == choice:
            return c
    return None


def _yaml(job: Json) -> str:
    shown = json.loads(json.dumps(job))
    (shown.get("metadata") or {}).pop("managedFields", None)
    return yaml.safe_dump(shown, sort_keys=False)


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def _list_events(source: Source, user: User, keys: list[str], cells: Any, poll: float) -> Generator[str]:
    """The cells of the listed rows whenever they change; never adds, removes or reorders rows."""
    sent: dict[str, str] = {}
    wanted = set(keys)
    while True:
        current = {s.key: s for s in source.summaries(user) if s.key in wanted}
        now = datetime.now(UTC)
        changed: dict[str, str] = {}
        for key in keys:
            rid = row_id(key)
            summary: Summary | None = current.get(key)
            for name in ("state", "replicas", "restarts", "duration"):
                html = (
                    str(getattr(cells.module, name)(summary, now))
                    if summary
                    else ("gone" if name == "state" else "")
                )
                if sent.get(f"{rid}-{name}") != html:
                    changed[f"{rid}-{name}"] = sent[f"{rid}-{name}"] = html
        yield _sse("cells", changed) if changed else ": idle\n\n"
        time.sleep(poll)


def _job_events(
    details: Generator[Detail | None], parts: Any, links_of: Callable[[Json], PageLinks]
) -> Generator[str]:
    with contextlib.closing(details):
        yield from _parts(details, parts, links_of)


def _parts(
    details: Iterator[Detail | None], parts: Any, links_of: Callable[[Json], PageLinks]
) -> Iterator[str]:
    sent: dict[str, str] = {}
    for detail in details:
        if detail is None:
            yield _sse("parts", {"status": "<p>the job is gone (or you may no longer see it)</p>"})
            return
        now = datetime.now(UTC)
        links = links_of(detail.job)
        html = {
            "status": str(parts.module.status(detail.summary, now, links)),
            "pods": str(parts.module.pods(detail, replica_name, links)),
            "events": str(parts.module.events(detail)),
            "picture": timeline(detail.job, detail.pods, now),
        }
        changed = {k: v for k, v in html.items() if sent.get(k) != v}
        sent.update(changed)
        yield _sse("parts", changed) if changed else ": idle\n\n"
        if not detail.live:
            yield _sse("done", {})
            return


def _log_events(batches: Generator[list[str]]) -> Generator[str]:
    with contextlib.closing(batches):
        yield from _log_batches(batches)


def _log_batches(batches: Iterator[list[str]]) -> Iterator[str]:
    first = True
    for batch in batches:
        if first:
            yield _sse("reset", batch[-LOG_LINES:])
            first = False
        elif batch:
            yield _sse("lines", batch[-LOG_LINES:])
        else:
            yield ": idle\n\n"
    yield _sse("done", {})
