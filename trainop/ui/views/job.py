"""A job's page, the stream that keeps it current, and the actions it offers."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Generator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import yaml
from flask import Blueprint, Response, abort, current_app, redirect, render_template, request, url_for
from markupsafe import Markup

from trainop.jsontypes import Json
from trainop.local.logs import replica_name
from trainop.ui import sse
from trainop.ui.source import BadKey, Container, Detail, Invalid, NotAllowed
from trainop.ui.timeline import timeline
from trainop.ui.views.context import detail_or_404, now, stream_owner, ui, user, writes_allowed
from trainop.ui.views.shown import PageLinks, links_of

job = Blueprint("job", __name__)
# What a browser holds of a followed log; older lines are dropped as new ones come (static/ui.js too).
LOG_LINES = 2000
# What a page (and a stream's first batch) shows of a log's end.
PAGE_LOG_LINES = 500


@job.get("/job/<path:key>")
def page(key: str) -> Any:
    detail = detail_or_404(key)
    chosen = container(request.args.get("log", ""), detail)
    app, who = ui(), user()
    # Without JavaScript this is the log; with it, the stream starts over from the same lines.
    lines = app.source.read_logs(who, key, detail, chosen, PAGE_LOG_LINES)
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
        actions=[a for a in app.source.actions if applies(a, detail) and app.source.may(who, key, a)]
        if app.settings.writable
        else [],
        message=request.args.get("message", ""),
    )


@job.get(f"{sse.STREAM_PREFIX}job/<path:key>")
def stream(key: str) -> Response:
    detail_or_404(key)
    app, who = ui(), user()
    parts = current_app.jinja_env.get_template("parts.html")
    links = partial(links_of, app)

    def events() -> Generator[str]:
        return _events(app.source.details(who, key, app.settings.poll_seconds), parts, links)

    return app.streams.open(stream_owner(who), events)


@job.post("/action/<action>/<path:key>")
def act(action: str, key: str) -> Any:
    writes_allowed()
    source = ui().source
    if action not in source.actions:
        abort(404)
    try:
        message = source.act(user(), key, action)
    except NotAllowed as exc:
        abort(403, str(exc))
    except BadKey:
        raise  # a 404 that says what is wrong with the address (trainop.ui.app), not a message on a page
    except Invalid as exc:
        message = str(exc)
    if action == "delete" and not message.startswith(("the run", "no run")):
        return redirect(url_for("jobs.index", message=message), 303)
    return redirect(url_for("job.page", key=key, message=message), 303)


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


def container(choice: str, detail: Detail) -> Container | None:
    """The page's container whose log `choice` (`<pod>/<container>`) names; None for the merged log."""
    for c in detail.containers:
        if f"{c.pod}/{c.name}" == choice:
            return c
    return None


def _yaml(job: Json) -> str:
    shown = json.loads(json.dumps(job))
    (shown.get("metadata") or {}).pop("managedFields", None)
    return yaml.safe_dump(shown, sort_keys=False)


def _events(
    details: Generator[Detail | None], parts: Any, links_of: Callable[[Json], PageLinks]
) -> Generator[str]:
    """The page's parts whenever they change, until the job is gone or can no longer change."""
    changes = sse.Changes()
    with contextlib.closing(details):
        for detail in details:
            if detail is None:
                yield sse.event("parts", {"status": "<p>the job is gone (or you may no longer see it)</p>"})
                return
            at = datetime.now(UTC)
            links = links_of(detail.job)
            yield changes.update(
                "parts",
                {
                    "status": str(parts.module.status(detail.summary, at, links)),
                    "pods": str(parts.module.pods(detail, replica_name, links)),
                    "events": str(parts.module.events(detail)),
                    "picture": timeline(detail.job, detail.pods, at),
                },
            )
            if not detail.live:
                yield sse.event("done", {})
                return
