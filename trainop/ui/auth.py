"""Who is asking, and whether a write is really theirs.

Modes: `none` (no sign-in; only for a UI on this machine: `trainop ui` refuses it on another address),
`proxy` (an authenticating proxy in front, as Kubeflow's dashboards have, puts the user in a header the UI
trusts, the groups optionally in another, and proves it is the proxy with a shared secret in a third),
`token` (the user's Kubernetes bearer token, in the Authorization header or signed in once through the
page into a cookie, checked with a TokenReview).

In proxy mode the UI impersonates whom the headers name, so the rules here bound what a header can make
it: only a request carrying the proxy's secret names anyone; no user named `system:...` (the cluster's
own components) is impersonated; groups only from the deployment's list (`--impersonate-groups`, the
same list the chart's ClusterRole names), never a `system:` group (docs/security.md#the-web-ui).

CSRF: every page carries a random token tied to the browser's session cookie; a write or a sign-in
without the same token in its form (or in the X-CSRF-Token header of an htmx request), or from another
origin, is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from flask import Request, session

from trainop.ui.bounded import Bucket, Expiring
from trainop.ui.source import User

MODES = ("none", "proxy", "token")
TOKEN_COOKIE = "trainop_token"
PROXY_SECRET_ENV = "TRAINOP_UI_PROXY_SECRET"
PROXY_SECRET_HEADER = "X-Trainop-Proxy-Secret"
# Names the apiserver gives its own components and reserved groups: never impersonated.
SYSTEM = "system:"
# A token that passed a review is trusted this long; one that failed is refused from memory this long.
POSITIVE_SECONDS = 60.0
NEGATIVE_SECONDS = 30.0
# A token that once passed is remembered this long, so its next review (after POSITIVE_SECONDS) is not
# counted against the reviews of unknown tokens.
KNOWN_SECONDS = 3600.0
MAX_CACHED = 10_000
# Reviews of tokens the UI has not seen pass, for all clients together: a flood of random tokens costs
# the apiserver at most this many TokenReviews, while known tokens keep being served.
UNKNOWN_REVIEWS_PER_SECOND = 5.0
UNKNOWN_REVIEWS_BURST = 20


class Unauthenticated(Exception):
    """No user could be established for the request (401, with the sign-in page)."""


class Refused(Exception):
    """The request names someone the UI will not act as (403)."""


class TooManyReviews(Exception):
    """Too many unknown tokens to review right now (429)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many sign-ins with new tokens right now; try again in {retry_after} s")
        self.retry_after = retry_after


@dataclass(frozen=True)
class AuthSettings:
    mode: str = "none"
    user_header: str = "X-Forwarded-User"
    groups_header: str = ""
    user_prefix: str = ""  # stripped from the header's value (`accounts.google.com:` in Kubeflow)
    # The header in which the proxy sends the secret it shares with the UI, and the secret.
    proxy_secret_header: str = PROXY_SECRET_HEADER
    proxy_secret: str = field(default="", repr=False)
    # The groups the UI may impersonate (the chart's ui.auth.impersonateGroups); others are not used.
    groups: tuple[str, ...] = ()
    # Mark cookies Secure on every answer, not only on requests seen to come over https.
    secure_cookies: bool = False


Reviewer = Callable[[str], User | None]


def check_settings(settings: AuthSettings) -> None:
    """Refuse settings the UI must not start with (ValueError naming what to set)."""
    if settings.mode not in MODES:
        raise ValueError(f"auth mode must be one of {', '.join(MODES)}, not {settings.mode!r}")
    if settings.mode == "proxy" and not settings.proxy_secret:
        raise ValueError(
            f"--auth proxy needs the secret the proxy sends in {settings.proxy_secret_header} "
            f"(set {PROXY_SECRET_ENV}; the chart's ui.auth.proxySecret.name): without it anyone who "
            "reaches the UI could name any user"
        )
    system = [g for g in settings.groups if g.startswith(SYSTEM)]
    if system:
        raise ValueError(
            f"--impersonate-groups {','.join(system)}: groups starting with {SYSTEM} are the cluster's "
            "own (system:masters bypasses all authorization) and are never impersonated; remove them"
        )


def from_the_proxy(sent: str, secret: str) -> bool:
    """Whether the request carries the proxy's secret (compared in constant time)."""
    return bool(secret) and hmac.compare_digest(sent.encode(), secret.encode())


def impersonable_user(name: str) -> str:
    """The user name, if the UI may act as it."""
    if name.startswith(SYSTEM):
        raise Refused(
            f"the proxy named the user {name!r}: names starting with {SYSTEM} are the cluster's own "
            "components and service accounts, which the UI never acts as"
        )
    return name


def impersonable_groups(
    sent: Iterable[str], allowed: Iterable[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The groups the UI acts with, and those it leaves out (not in `allowed`), in the order sent."""
    named = tuple(dict.fromkeys(sent))
    system = [g for g in named if g.startswith(SYSTEM)]
    if system:
        raise Refused(
            f"the proxy named the group {system[0]!r}: groups starting with {SYSTEM} are the cluster's "
            "own and never impersonated (have the proxy leave them out of its groups header)"
        )
    permitted = set(allowed)
    return tuple(g for g in named if g in permitted), tuple(g for g in named if g not in permitted)


def token_key(token: str) -> str:
    """What a token is remembered by: a digest, so no cache holds a usable token as its key."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenReviews:
    """TokenReview answers, bounded: positive ones reused POSITIVE_SECONDS, refusals NEGATIVE_SECONDS,
    at most MAX_CACHED of each; a token not seen to pass is reviewed only while the shared bucket of
    unknown-token reviews allows."""

    def __init__(
        self,
        review: Reviewer,
        clock: Callable[[], float] = time.monotonic,
        bucket: Bucket | None = None,
        capacity: int = MAX_CACHED,
    ) -> None:
        self.review = review
        self.clock = clock
        self.bucket = bucket or Bucket(UNKNOWN_REVIEWS_PER_SECOND, UNKNOWN_REVIEWS_BURST)
        # key -> (reviewed again after, the user)
        self.passed: Expiring[str, tuple[float, User]] = Expiring(capacity)
        self.refused: Expiring[str, bool] = Expiring(capacity)
        self._lock = threading.Lock()

    def user(self, token: str) -> User | None:
        key = token_key(token)
        now = self.clock()
        with self._lock:
            known, passed = self.passed.get(key, now)
            if passed is not None and passed[0] > now:
                return passed[1]
            if not known and self.refused.get(key, now)[0]:
                return None
            if not known and not self.bucket.take(now):
                raise TooManyReviews(self.bucket.wait())
        user = self.review(token)
        now = self.clock()
        with self._lock:
            if user is None:
                self.refused.put(key, True, NEGATIVE_SECONDS, now)
                self.passed.discard(key)  # no longer known: its next review is counted
            else:
                self.passed.put(key, (now + POSITIVE_SECONDS, user), KNOWN_SECONDS, now)
        return user


class Authenticator:
    def __init__(
        self,
        settings: AuthSettings,
        review: Reviewer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_settings(settings)
        if settings.mode == "token" and review is None:
            raise ValueError("auth mode token needs a cluster to review tokens with (--cluster)")
        self.settings = settings
        self.reviews = TokenReviews(review, clock) if review is not None else None

    def user(self, request: Request) -> User:
        mode = self.settings.mode
        if mode == "none":
            return User()
        if mode == "proxy":
            return self._proxy_user(request)
        header = request.headers.get("Authorization", "")
        token = (
            header[7:].strip()
            if header.lower().startswith("bearer ")
            else request.cookies.get(TOKEN_COOKIE, "")
        )
        if not token:
            raise Unauthenticated("sign in with a Kubernetes token (kubectl create token ...)")
        assert self.reviews is not None
        user = self.reviews.user(token)
        if user is None:
            raise Unauthenticated("the token was not accepted by the cluster (expired or unknown)")
        return user

    def _proxy_user(self, request: Request) -> User:
        settings = self.settings
        if not from_the_proxy(request.headers.get(settings.proxy_secret_header, ""), settings.proxy_secret):
            raise Unauthenticated(
                f"the request did not come through the authenticating proxy (its "
                f"{settings.proxy_secret_header} header is missing or wrong)"
            )
        name = request.headers.get(settings.user_header, "").strip()
        if not name:
            raise Unauthenticated(f"the request has no {settings.user_header} header from the proxy")
        name = impersonable_user(name.removeprefix(settings.user_prefix))
        if not settings.groups_header:
            return User(name)
        # Comma-separated, on one line or several (proxies do both).
        lines = request.headers.getlist(settings.groups_header)
        sent = (g.strip() for line in lines for g in line.split(",") if g.strip())
        groups, left_out = impersonable_groups(sent, settings.groups)
        return User(name, groups, left_out=left_out)


def secure_request(request: Request, always: bool) -> bool:
    """Whether cookies set in answer to `request` are marked Secure: when told to, when the request came
    over https, or when the proxy in front says it did (X-Forwarded-Proto). Believing that header can only
    add the flag, never remove it, so a client that forges it harms no one but itself."""
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    return always or request.is_secure or forwarded == "https"


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
    return origin is None or same_origin(origin, request)


def same_origin(origin: str, request: Request) -> bool:
    """Whether a browser's Origin is this UI's: its host as the request names it, over http or https,
    since behind a proxy that terminates TLS the browser's scheme is https while the UI sees http."""
    scheme, sep, host = origin.partition("://")
    return bool(sep) and scheme in ("http", "https") and host == request.host
