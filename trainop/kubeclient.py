"""The one minimal Kubernetes API client of both servers: a few JSON calls over urllib. The hooks read and
delete jobs and write Events with it (hooks.kubeapi); the webhook server keeps its certificate with it.

Credentials come from the pod's ServiceAccount, or from the kubeconfig named by TRAINOP_KUBECONFIG
when the server runs outside a cluster (tests, development); each server reads that variable with its
settings and passes it to `connect`. The ServiceAccount token is re-read for
every request: the kubelet rotates the projected token file (it expires after about an hour), and the
server runs for months.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainop.jsontypes import Json

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
KUBECONFIG_ENV = "TRAINOP_KUBECONFIG"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class ApiError(Exception):
    """An HTTP error answer of the apiserver, with its status code and message."""

    def __init__(self, method: str, path: str, status: int, message: str) -> None:
        super().__init__(f"{method} {path}: {status} {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class KubeClient:
    server: str
    context: ssl.SSLContext
    token: str | None = None
    token_file: Path | None = None
    timeout: float = 10.0
    # Sent with every write, so managedFields say which server wrote a field; None sends none.
    field_manager: str | None = None
    # Sent with every request, one line per pair even when a name repeats: the web UI's Impersonate-User
    # and an Impersonate-Group per group, so RBAC judges the user with all their groups.
    headers: tuple[tuple[str, str], ...] = ()

    def get(self, path: str) -> Json | None:
        """The object at `path`, or None if it does not exist."""
        try:
            return self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def request(
        self, method: str, path: str, body: Json | None = None, content_type: str | None = None
    ) -> Json:
        try:
            with self.open(method, path, body, content_type) as response:
                payload: Json = json.loads(response.read() or b"{}")
                return payload
        except urllib.error.HTTPError as exc:
            raise ApiError(method, path, exc.code, _status_message(exc)) from None

    def open(
        self,
        method: str,
        path: str,
        body: Json | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """The open response, for a caller that reads it as a stream (a watch, a followed log)."""
        url = self.server + path
        if method != "GET" and self.field_manager:
            query = urllib.parse.urlencode({"fieldManager": self.field_manager})
            url += ("&" if "?" in path else "?") + query
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type or "application/json")
        token = self._token()
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        return _opener(self.context, self.headers).open(request, timeout=timeout or self.timeout)

    def _token(self) -> str | None:
        if self.token_file is not None:
            return self.token_file.read_text().strip()
        return self.token


def connect(kubeconfig: str) -> KubeClient:
    """The client for this process: the kubeconfig its settings name (TRAINOP_KUBECONFIG), else ("") the
    pod's ServiceAccount."""
    if kubeconfig:
        return from_kubeconfig(Path(kubeconfig))
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not (host and port and (SERVICE_ACCOUNT / "token").is_file()):
        raise RuntimeError(
            f"no Kubernetes credentials: not in a pod with a mounted ServiceAccount token "
            f"(automountServiceAccountToken) and {KUBECONFIG_ENV} is not set"
        )
    context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    server = f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}"
    return KubeClient(server=server, context=context, token_file=SERVICE_ACCOUNT / "token")


def from_kubeconfig(path: Path) -> KubeClient:
    """The current context of a kubeconfig: server, CA, and a token or client certificate."""
    try:
        config = yaml.safe_load(path.read_text())
        current = config["current-context"]
        context = _named(config["contexts"], current)["context"]
        cluster = _named(config["clusters"], context["cluster"])["cluster"]
        user = _named(config["users"], context["user"])["user"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise ValueError(f"{KUBECONFIG_ENV}={path}: not a usable kubeconfig ({exc!r})") from exc
    files = Path(tempfile.mkdtemp(prefix="trainop-kubeconfig-"))
    ssl_context = ssl.create_default_context(cafile=_file(cluster, "certificate-authority", files))
    cert = _file(user, "client-certificate", files)
    if cert:
        ssl_context.load_cert_chain(cert, _file(user, "client-key", files))
    token_file = user.get("tokenFile")
    return KubeClient(
        server=str(cluster["server"]).rstrip("/"),
        context=ssl_context,
        token=user.get("token"),
        token_file=Path(token_file) if token_file else None,
    )


def _named(items: list[Json], name: str) -> Json:
    for item in items:
        if item.get("name") == name:
            return item
    raise KeyError(name)


def _file(entry: Json, key: str, directory: Path) -> str | None:
    """Path of a kubeconfig credential given inline (`<key>-data`, base64) or as a file."""
    inline = entry.get(f"{key}-data")
    if inline:
        path = directory / key
        path.write_bytes(base64.b64decode(inline))
        path.chmod(0o600)
        return str(path)
    value = entry.get(key)
    return str(value) if value else None


def _opener(
    context: ssl.SSLContext, headers: tuple[tuple[str, str], ...] = ()
) -> urllib.request.OpenerDirector:
    # Never through an HTTP proxy from the environment: the apiserver is reached directly.
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _HeadersHandler(context, headers))


class _HeadersHandler(urllib.request.HTTPSHandler):
    """HTTP(S) that sends `headers` one line each. urllib keeps a request's headers in a dict, one value
    per name, but the apiserver takes each Impersonate-Group line as one group (a comma is part of it)."""

    handler_order = urllib.request.HTTPHandler.handler_order - 1  # before urllib's plain-HTTP handler
    http_request = urllib.request.AbstractHTTPHandler.do_request_

    def __init__(self, context: ssl.SSLContext, headers: tuple[tuple[str, str], ...]) -> None:
        super().__init__(context=context)
        self.context = context
        self.extra = headers

    def _connection(self, base: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
        extra = self.extra

        class Connection(base):  # type: ignore[valid-type,misc]
            def endheaders(self, *args: Any, **kwargs: Any) -> None:
                for name, value in extra:
                    self.putheader(name, value)
                super().endheaders(*args, **kwargs)

        return Connection

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(self._connection(http.client.HTTPConnection), req)

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(self._connection(http.client.HTTPSConnection), req, context=self.context)


def _status_message(exc: urllib.error.HTTPError) -> str:
    body = exc.read()
    try:
        status = json.loads(body)
    except ValueError:
        return body.decode(errors="replace")[:500] or str(exc.reason)
    return str(status.get("message") or exc.reason) if isinstance(status, dict) else str(exc.reason)
