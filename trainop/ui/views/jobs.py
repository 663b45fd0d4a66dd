"""The list of jobs, and the stream that keeps its rows' changing cells current."""

from __future__ import annotations

import time
from collections.abc import Generator
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response, current_app, render_template, request

from trainop.frameworks import KINDS
from trainop.ui import sse
from trainop.ui.source import Source, User
from trainop.ui.summary import PAGE_SIZES, SORT_KEYS, STATES, Query, select
from trainop.ui.views.context import stream_owner, ui, user
from trainop.ui.views.shown import row_id

jobs = Blueprint("jobs", __name__)
# The list's cells that change while a job runs (templates/cells.html has a macro of each).
CELLS = ("state", "replicas", "restarts", "duration")


@jobs.get("/")
def index() -> Any:
    query = Query.from_args(request.args)
    summaries = ui().source.summaries(user())
    context = {
        "page": select(summaries, query),
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


@jobs.get(f"{sse.STREAM_PREFIX}list")
def stream() -> Response:
    keys = request.args.getlist("key")[: max(PAGE_SIZES)]
    who, app = user(), ui()
    cells = current_app.jinja_env.get_template("cells.html")
    poll = app.settings.poll_seconds
    return app.streams.open(stream_owner(who), lambda: _events(app.source, who, keys, cells, poll))


def _events(source: Source, who: User, keys: list[str], cells: Any, poll: float) -> Generator[str]:
    """The cells of the listed rows whenever they change; never adds, removes or reorders rows."""
    changes = sse.Changes()
    wanted = set(keys)
    while True:
        current = {s.key: s for s in source.summaries(who) if s.key in wanted}
        now = datetime.now(UTC)
        snapshot: dict[str, str] = {}
        for key in keys:
            summary = current.get(key)
            for name in CELLS:
                gone = "gone" if name == "state" else ""
                snapshot[f"{row_id(key)}-{name}"] = (
                    str(getattr(cells.module, name)(summary, now)) if summary else gone
                )
        yield changes.update("cells", snapshot)
        time.sleep(poll)
