"""What every view reads: the app's source, settings, sign-in and event streams, and the checks views
share before they read or write a job."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from flask import abort, current_app, g, request

from trainop.ui.auth import Authenticator, csrf_ok
from trainop.ui.settings import UiSettings
from trainop.ui.source import Detail, NotAllowed, Source, User
from trainop.ui.sse import Streams

EXTENSION = "trainop"


@dataclass(frozen=True)
class Ui:
    source: Source
    settings: UiSettings
    auth: Authenticator
    streams: Streams


def ui() -> Ui:
    """The `Ui` of the app answering this request (trainop.ui.app.create_app puts it there)."""
    found: Ui = current_app.extensions[EXTENSION]
    return found


def user() -> User:
    found: User = g.user
    return found


def now() -> datetime:
    return datetime.now(UTC)


def stream_owner(who: User) -> tuple[str, tuple[str, ...], str]:
    """Whose quota of event streams an open stream counts against (a token only by its digest)."""
    return (who.name, who.groups, hashlib.sha256(who.token.encode()).hexdigest() if who.token else "")


def detail_or_404(key: str) -> Detail:
    try:
        found = ui().source.detail(user(), key)
    except NotAllowed:
        abort(403)
    if found is None:
        abort(404)
    return found


def writes_allowed() -> None:
    if not ui().settings.writable:
        abort(403, "this UI is read-only")
    if not csrf_ok(request):
        abort(403, "the form is stale or not from this page (CSRF check): reload the page")
