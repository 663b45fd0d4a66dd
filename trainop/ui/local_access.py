"""Who may use the local UI (`trainop ui RUNS_DIR`, `trainop run --ui`): whoever holds its token, through a
name of this machine's loopback.

127.0.0.1 is shared by every user of the machine, and any web page can make a browser send requests to it
(under a name of its own that it points at 127.0.0.1: DNS rebinding). So every request must carry the
token the UI printed (`?token=` once, then the cookie it is exchanged for), and name the UI by one of the
hosts it answers to; a write must also come from one of those origins. The answers to each refusal say
what to do. Docs: docs/ui.md#local-mode-who-can-use-it.
"""

from __future__ import annotations

import hmac
import html
import secrets
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any

from flask import Flask

TOKEN_PARAM = "token"
# Methods that change something; each must also come from the UI's own origin.
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Answered without the token: says only that the server is up (what a supervisor polls).
OPEN_PATHS = frozenset({"/healthz"})

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
Wsgi = Callable[[Environ, StartResponse], Iterable[bytes]]


@dataclass(frozen=True)
class LocalAccess:
    """The UI's token and the Host values it answers to (lower case, with the port)."""

    token: str
    hosts: frozenset[str]
    port: int

    @property
    def cookie(self) -> str:
        # Browsers send a host's cookies to all its ports: one name per port keeps two UIs apart.
        return f"trainop_ui_{self.port}"

    def url(self, base: str) -> str:
        """`base` (http://127.0.0.1:PORT/) with the token, the address to print."""
        return f"{base}?{TOKEN_PARAM}={self.token}"

    def token_ok(self, sent: str) -> bool:
        return hmac.compare_digest(sent.encode(), self.token.encode())


def allowed_hosts(bound: str, port: int) -> frozenset[str]:
    """127.0.0.1, localhost and [::1] at `port`, and the address the server was bound to."""
    names = {"127.0.0.1", "localhost", "[::1]", f"[{bound}]" if ":" in bound else bound}
    return frozenset(f"{name.lower()}:{port}" for name in names)


def new_access(bound: str, port: int) -> LocalAccess:
    return LocalAccess(secrets.token_urlsafe(32), allowed_hosts(bound, port), port)


class LocalGate:
    """WSGI middleware in front of the local UI's app: Host, token (or cookie), and Origin on writes."""

    def __init__(self, app: Wsgi, access: LocalAccess) -> None:
        self.app = app
        self.access = access

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        access = self.access
        host = str(environ.get("HTTP_HOST", "")).lower()
        if host not in access.hosts:
            return _page(
                start_response,
                "421 Misdirected Request",
                f"This UI answers only to {_names(access)}, not to the name {host or '(none)'} this request "
                "was sent to (a page of another site pointing its own name at this machine is refused). "
                "Open the address trainop printed.",
            )
        path = str(environ.get("PATH_INFO", ""))
        if path in OPEN_PATHS:
            return self.app(environ, start_response)
        query = urllib.parse.parse_qs(str(environ.get("QUERY_STRING", "")))
        sent = query.get(TOKEN_PARAM, [""])[-1]
        if sent:
            if not access.token_ok(sent):
                return _page(
                    start_response, "401 Unauthorized", _OPEN_PRINTED + " The token in this address is wrong."
                )
            return _exchange(start_response, access, path, query)
        cookie = SimpleCookie(str(environ.get("HTTP_COOKIE", "")))
        held = cookie.get(access.cookie)
        if held is None or not access.token_ok(held.value):
            return _page(start_response, "401 Unauthorized", _OPEN_PRINTED)
        if str(environ.get("REQUEST_METHOD", "GET")).upper() in WRITES:
            origin = str(environ.get("HTTP_ORIGIN", ""))
            if origin and origin.lower() not in {f"http://{name}" for name in access.hosts}:
                return _page(
                    start_response,
                    "403 Forbidden",
                    f"A change sent from {origin} is refused: only pages of this UI ({_names(access)}) may "
                    "make changes.",
                )
        return self.app(environ, start_response)


_OPEN_PRINTED = (
    "This UI needs its token: open the address trainop printed when it started "
    "(http://127.0.0.1:PORT/?token=...), in this browser."
)


def _names(access: LocalAccess) -> str:
    return ", ".join(sorted(access.hosts))


def _exchange(
    start_response: StartResponse, access: LocalAccess, path: str, query: dict[str, list[str]]
) -> Iterable[bytes]:
    """The cookie for the token, and the same address without it (kept out of history and Referer)."""
    rest = urllib.parse.urlencode({k: v for k, v in query.items() if k != TOKEN_PARAM}, doseq=True)
    target = urllib.parse.quote(path or "/") + (f"?{rest}" if rest else "")
    cookie = f"{access.cookie}={access.token}; Path=/; HttpOnly; SameSite=Strict"
    start_response(
        "303 See Other",
        [
            ("Location", target),
            ("Set-Cookie", cookie),
            ("Content-Length", "0"),
            ("Cache-Control", "no-store"),
        ],
    )
    return [b""]


def _page(start_response: StartResponse, status: str, message: str) -> Iterable[bytes]:
    body = (
        "<!doctype html><meta charset=utf-8><title>trainop ui</title>"
        f"<h1>{html.escape(status)}</h1><p>{html.escape(message)}</p>\n"
    ).encode()
    start_response(
        status,
        [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("Content-Security-Policy", "default-src 'none'"),
        ],
    )
    return [body]


def guard(app: Flask, access: LocalAccess) -> None:
    """Put the gate in front of `app`, the local UI's, before its server starts serving (once it is bound:
    the allowed hosts hold the port it got)."""
    # flask's documented place for WSGI middleware; its type is a method's.
    app.wsgi_app = LocalGate(app.wsgi_app, access)  # type: ignore[method-assign]
