"""Fetching a job file from a URL for `trainop run`: https with the certificate verified, bounded in size
and time. Plain http only to this machine (a file served from a local directory), never across a network
where anyone on the path could change what runs here."""

from __future__ import annotations

import ipaddress
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPMessage, HTTPResponse
from pathlib import Path
from typing import IO

# A job with its ConfigMaps: the apiserver takes at most 3 MiB per object and a ConfigMap holds at most
# 1 MiB, so a file of a job and a few scripts fits with room to spare.
MAX_BYTES = 4 * 1024 * 1024
TIMEOUT_SECONDS = 30.0
CHUNK = 64 * 1024


class FetchError(Exception):
    """The URL gave no file to run; the message says why and what to do."""


_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_url(source: str) -> bool:
    """`scheme://...`: every scheme but https (and loopback http) is then refused, not read as a path."""
    return bool(_URL.match(source))


def fetch(
    url: str, ca_file: Path | None = None, max_bytes: int = MAX_BYTES, timeout: float = TIMEOUT_SECONDS
) -> str:
    """The text at `url`. Trusted CAs: `ca_file` alone when given, else the system's (SSL_CERT_FILE and
    SSL_CERT_DIR, when set, replace them, as for every OpenSSL program)."""
    check_allowed(url)
    try:
        context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (OSError, ssl.SSLError) as exc:
        raise FetchError(f"--ca-file {ca_file}: cannot load CA certificates: {exc}") from None
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), _CheckedRedirects())
    deadline = time.monotonic() + timeout
    try:
        with opener.open(urllib.request.Request(url, headers={"Accept": "*/*"}), timeout=timeout) as response:
            body = _read_bounded(response, max_bytes, deadline, timeout)
    except FetchError:
        raise
    except urllib.error.HTTPError as exc:
        raise FetchError(f"the server answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise FetchError(_why(exc.reason, timeout)) from None
    except TimeoutError:
        raise FetchError(f"no complete answer within {timeout:g} s") from None
    except (OSError, ssl.SSLError) as exc:
        raise FetchError(_why(exc, timeout)) from None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FetchError(f"the answer is not UTF-8 text (byte {exc.start}); expected a YAML file") from None


def check_allowed(url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        if not parts.hostname:
            raise FetchError("the URL names no host")
        return
    if parts.scheme == "http" and is_loopback_host(parts.hostname or ""):
        return
    if parts.scheme == "http":
        raise FetchError(
            "plain http is accepted only from this machine (localhost, 127.0.0.0/8, ::1): anyone on the "
            "network path could change what it runs; use an https URL"
        )
    raise FetchError(f"unsupported URL scheme {parts.scheme!r}; use an https URL")


def is_loopback_host(host: str) -> bool:
    """`localhost` or a loopback address: this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is held to the same rule as the URL given: https never turns into remote plain http."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        try:
            check_allowed(newurl)
        except FetchError as exc:
            raise FetchError(f"redirected to {newurl}: {exc}") from None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _read_bounded(response: HTTPResponse, max_bytes: int, deadline: float, timeout: float) -> bytes:
    length = response.headers.get("Content-Length")
    if length and length.isdigit() and int(length) > max_bytes:
        raise FetchError(f"the file is {int(length)} bytes, more than the {max_bytes} a job file may have")
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise FetchError(f"no complete answer within {timeout:g} s")
        # read1: at most one read of the socket, so a server dripping bytes meets the deadline.
        chunk = response.read1(CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise FetchError(f"the file is larger than the {max_bytes} bytes a job file may have")
        chunks.append(chunk)


def _why(reason: object, timeout: float) -> str:
    if isinstance(reason, ssl.SSLCertVerificationError):
        return (
            f"the server's TLS certificate is not trusted ({reason.verify_message}); pass the CA that "
            "signed it with --ca-file, or set SSL_CERT_FILE"
        )
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed: {reason.reason or reason}"
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(reason, socket.gaierror):
        return f"cannot resolve the host: {reason.strerror}"
    if isinstance(reason, OSError):
        return f"cannot connect: {reason.strerror or reason}"
    return f"cannot fetch: {reason}"
