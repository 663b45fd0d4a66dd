"""The stream that follows a job's log (the page itself shows its end: views/job.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Generator

from flask import Blueprint, Response, request

from trainop.ui import sse
from trainop.ui.views.context import detail_or_404, stream_owner, ui, user
from trainop.ui.views.job import LOG_LINES, PAGE_LOG_LINES, container

logs = Blueprint("logs", __name__)


@logs.get(f"{sse.STREAM_PREFIX}logs/<path:key>")
def stream(key: str) -> Response:
    detail = detail_or_404(key)
    chosen = container(request.args.get("log", ""), detail)
    app, who = ui(), user()
    return app.streams.open(
        stream_owner(who),
        lambda: _events(app.source.follow_logs(who, key, detail, chosen, PAGE_LOG_LINES)),
    )


def _events(batches: Generator[list[str]]) -> Generator[str]:
    """The log's last lines at once (`reset`), then each batch of new ones, until it can no longer grow."""
    with contextlib.closing(batches):
        first = True
        for batch in batches:
            if first:
                yield sse.event("reset", batch[-LOG_LINES:])
                first = False
            elif batch:
                yield sse.event("lines", batch[-LOG_LINES:])
            else:
                yield sse.IDLE
        yield sse.event("done", {})
