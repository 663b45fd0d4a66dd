"""The API calls the hooks make: reading a job back, and deleting it once its TTL expired.

Metacontroller cannot delete a parent (its issue #77), so the hook does it. It never trusts the job in
the request body for that (hooks.ttl): it reads the job from the apiserver, and deletes with a UID
precondition so a same-named successor is never hit. Credentials come from the pod's ServiceAccount, or
from a kubeconfig named by TRAINOP_KUBECONFIG when running outside a cluster.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from api.kinds import kind_info

log = logging.getLogger("trainop.hooks")
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class Deleter(Protocol):
    def get_job(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The apiserver's copy of the job, or None if it does not exist."""

    def delete_job(self, job: dict[str, Any]) -> bool:
        """Delete `job` (the apiserver's copy) if it still has its uid; False if it was already gone."""


@dataclass(frozen=True)
class ApiClient:
    server: str
    context: ssl.SSLContext
    token: str | None = None

    def _url(self, kind: str, namespace: str, name: str) -> str:
        plural = kind_info(kind).plural
        quoted = urllib.parse.quote
        return (
            f"{self.server}/apis/kubeflow.org/v1/namespaces/{quoted(namespace, safe='')}/"
            f"{plural}/{quoted(name, safe='')}"
        )

    def _open(self, request: urllib.request.Request) -> bytes:
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, context=self.context, timeout=5) as response:
            data: bytes = response.read()
            return data

    def get_job(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        request = urllib.request.Request(self._url(kind, namespace, name), method="GET")
        request.add_header("Accept", "application/json")
        try:
            job: dict[str, Any] = json.loads(self._open(request))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
        return job

    def delete_job(self, job: dict[str, Any]) -> bool:
        info = kind_info(str(job["kind"]))
        meta = job["metadata"]
        url = self._url(info.kind, meta.get("namespace") or "default", meta["name"])
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": meta.get("uid")},
        }
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="DELETE")
        request.add_header("Content-Type", "application/json")
        try:
            self._open(request)
        except urllib.error.HTTPError as exc:
            # Already gone, or a successor with another UID: both mean our job no longer exists.
            if exc.code not in (404, 409):
                raise
            return False
        log.info(
            json.dumps(
                {
                    "event": "ttl-deleted",
                    "kind": info.kind,
                    "namespace": meta.get("namespace"),
                    "name": meta["name"],
                }
            )
        )
        return True

    # ---- events (hooks.recorder) --------------------------------------------------------------------
    def _event_url(self, namespace: str, name: str = "") -> str:
        quoted = urllib.parse.quote
        base = f"{self.server}/api/v1/namespaces/{quoted(namespace, safe='')}/events"
        return f"{base}/{quoted(name, safe='')}" if name else base

    def create_event(self, namespace: str, event: dict[str, Any]) -> bool:
        """POST an Event; False if one of that name exists already (409)."""
        request = urllib.request.Request(
            self._event_url(namespace), data=json.dumps(event).encode(), method="POST"
        )
        request.add_header("Content-Type", "application/json")
        try:
            self._open(request)
        except urllib.error.HTTPError as exc:
            if exc.code == 409:
                return False
            raise
        return True

    def get_event(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Event as stored, read with an empty merge patch: the apiserver writes nothing for a no-op
        patch and answers with the object, so the hooks' RBAC needs only create and patch on events."""
        request = urllib.request.Request(self._event_url(namespace, name), data=b"{}", method="PATCH")
        request.add_header("Content-Type", "application/merge-patch+json")
        request.add_header("Accept", "application/json")
        try:
            event: dict[str, Any] = json.loads(self._open(request))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise
        return event

    def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        """A merge patch; False on a conflict (the patch carries a resourceVersion precondition)."""
        request = urllib.request.Request(
            self._event_url(namespace, name), data=json.dumps(patch).encode(), method="PATCH"
        )
        request.add_header("Content-Type", "application/merge-patch+json")
        try:
            self._open(request)
        except urllib.error.HTTPError as exc:
            if exc.code == 409:
                return False
            raise
        return True


def _data_or_file(entry: dict[str, Any], key: str, tmp: Path) -> str | None:
    if entry.get(f"{key}-data"):
        path = tmp / key
        path.write_bytes(base64.b64decode(entry[f"{key}-data"]))
        return str(path)
    value = entry.get(key)
    return str(value) if value else None


def from_kubeconfig(path: str) -> ApiClient:
    config = yaml.safe_load(Path(path).read_text())
    current = config.get("current-context")
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    tmp = Path(tempfile.mkdtemp(prefix="trainop-kubeconfig-"))
    ssl_context = ssl.create_default_context(cafile=_data_or_file(cluster, "certificate-authority", tmp))
    cert = _data_or_file(user, "client-certificate", tmp)
    if cert:
        ssl_context.load_cert_chain(cert, _data_or_file(user, "client-key", tmp))
    return ApiClient(server=str(cluster["server"]).rstrip("/"), context=ssl_context, token=user.get("token"))


def in_cluster() -> ApiClient:
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
    ssl_context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
    token = (SERVICE_ACCOUNT / "token").read_text().strip()
    return ApiClient(server=f"https://{host}:{port}", context=ssl_context, token=token)


def default_deleter() -> Deleter | None:
    """The API client for TTL deletion, or None when this process has no credentials."""
    kubeconfig = os.environ.get("TRAINOP_KUBECONFIG")
    if kubeconfig:
        return from_kubeconfig(kubeconfig)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and (SERVICE_ACCOUNT / "token").exists():
        return in_cluster()
    return None
