"""Who is asking, and whether a write is really theirs.

Modes: `none` (no sign-in; only for a UI on this machine: `trainop ui` refuses it on another address),
`proxy` (an authenticating proxy in front, as Kubeflow's dashboards have, puts the user in a header the UI
trusts; the groups optionally in another), `token` (the user's Kubernetes bearer token, in the
Authorization header or signed in once through the page into a cookie, checked with a TokenReview).

CSRF: every page carries a random token tied to the browser's session cookie; a write without the same
token in its form (or in the X-CSRF-Token header of an htmx request), or from another origin, is refused.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from flask import Request, session

from trainop.ui.source import User

MODES = ("none", "proxy", "token")
TOKEN_COOKIE = "trainop_token"
# A token that passed a review is trusted this long; one that failed is asked about again sooner.
POSITIVE_SECONDS = 60.0
NEGATIVE_SECONDS = 5.0
MAX_CACHED = 10_000


class Unauthenticated(Exception):
    """No user could be established for the request."""


@dataclass(frozen=True)
class AuthSettings:
    mode: str = "none"
    user_header: str = "X-Forwarded-User"
    groups_header: str = ""
    user_prefix: str = ""  # stripped from the header's value (`accounts.google.com:` in Kubeflow)


Reviewer = Callable[[str], User | None]


class Authenticator:
    def __init__(self, settings: AuthSettings, review: Reviewer | None = None) -> None:
        if settings.mode not in MODES:
            raise ValueError(f"auth mode must be one of {', '.join(MODES)}, not {settings.mode!r}")
        if settings.mode == "token" and review is None:
            raise ValueError("auth mode token needs a cluster to review tokens with (--cluster)")
        self.settings = settings
        self.review = review
        self._cache: dict[str, tuple[float, User | None]] = {}
        self._lock = threading.Lock()

    def user(self, request: Request) -> User:
        mode = self.settings.mode
        if mode == "none":
            return User()
        if mode == "proxy":
            name = request.headers.get(self.settings.user_header, "").strip()
            if not name:
                raise Unauthenticated(f"the request has no {self.settings.user_header} header from the proxy")
            name = name.removeprefix(self.settings.user_prefix)
            groups: tuple[str, ...] = ()
            if self.settings.groups_header:
                # Comma-separated, on one line or several (proxies do both).
                lines = request.headers.getlist(self.settings.groups_header)
                groups = tuple(g.strip() for line in lines for g in line.split(",") if g.strip())
            return User(name, groups)
        header = request.headers.get("Authorization", "")
        token = (
            header[7:].strip()
            if header.lower().startswith("bearer ")
            else request.cookies.get(TOKEN_COOKIE, "")
        )
        if not token:
            raise Unauthenticated("sign in with a Kubernetes token (kubectl create token ...)")
        user = self._reviewed(token)
        if user is None:
            raise Unauthenticated("the token was not accepted by the cluster (expired or unknown)")
        return user

    def _reviewed(self, token: str) -> User | None:
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(token)
            if cached and cached[0] > now:
                return cached[1]
        assert self.review is not None
        user = self.review(token)
        with self._lock:
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            self._cache[token] = (now + (POSITIVE_SECONDS if user else NEGATIVE_SECONDS), user)
        return user


def csrf_token() -> str:
    token = session.get("csrf")
    if not isinstance(token, str):
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def csrf_ok(request: Request) -> bool:
    expected = session.get("csrf")
    sent = request.form.get("csrf") or request.headers.get("X-CSRF-Token") or ""
    if not isinstance(expected, str) or not hmac.compare_digest(expected, sent):
        return False
    origin = request.headers.get("Origin")
    return origin is None or origin == request.host_url.rstrip("/")
