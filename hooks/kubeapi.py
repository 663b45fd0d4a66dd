"""The one API call the hooks make: deleting a job whose ttlSecondsAfterFinished has expired.

Metacontroller cannot delete a parent (its issue #77), so the hook does it, guarded by a UID
precondition so a same-named successor is never hit. Credentials come from the pod's
ServiceAccount, or from a kubeconfig named by TRAINOP_KUBECONFIG when running outside a cluster.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from api.kinds import kind_info

log = logging.getLogger("trainop.hooks")
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class Deleter(Protocol):
    def delete_job(self, job: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class ApiClient:
    server: str
    context: ssl.SSLContext
    token: str | None = None

    def delete_job(self, job: dict[str, Any]) -> None:
        info = kind_info(str(job["kind"]))
        meta = job["metadata"]
        url = (
            f"{self.server}/apis/kubeflow.org/v1/namespaces/{meta.get('namespace') or 'default'}/"
            f"{info.plural}/{meta['name']}"
        )
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": meta.get("uid")},
        }
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="DELETE")
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=5):
                pass
        except urllib.error.HTTPError as exc:
            # Already gone, or a successor with another UID: both mean our job no longer exists.
            if exc.code not in (404, 409):
                raise
        log.info(json.dumps({"event": "ttl-deleted", "kind": info.kind, "name": meta["name"]}))


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
