"""The API calls the hooks make: reading a job back, and deleting it once its TTL expired.

Metacontroller cannot delete a parent (its issue #77; docs/design.md#a-hook-cannot-delete-its-parent), so
the hook does it. It never trusts the job in the request body for that (trainop.controller.ttl): it reads
the job from the apiserver, and deletes with a UID precondition so a same-named successor is never hit.
Credentials come from the pod's ServiceAccount, or from a kubeconfig named by TRAINOP_KUBECONFIG when
running outside a cluster.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any, Protocol

from trainop.frameworks import kind_info
from trainop.kubeclient import SERVICE_ACCOUNT, ApiError, KubeClient, connect

log = logging.getLogger("trainop.hooks")
MERGE_PATCH = "application/merge-patch+json"
# A sync hook call waits for these requests (TTL deletion), so they must be short.
TIMEOUT_SECONDS = 5.0


class Deleter(Protocol):
    def get_job(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The apiserver's copy of the job, or None if it does not exist."""

    def delete_job(self, job: dict[str, Any]) -> bool:
        """Delete `job` (the apiserver's copy) if it still has its uid; False if it was already gone."""


def _quoted(part: str) -> str:
    return urllib.parse.quote(part, safe="")


@dataclass(frozen=True)
class ApiClient:
    kube: KubeClient

    def _job_path(self, kind: str, namespace: str, name: str) -> str:
        plural = kind_info(kind).plural
        return f"/apis/kubeflow.org/v1/namespaces/{_quoted(namespace)}/{plural}/{_quoted(name)}"

    def _answer(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        content_type: str | None = None,
        missing: int,
    ) -> dict[str, Any] | None:
        """The apiserver's answer, or None when it answered with the status ``missing`` (404 or 409)."""
        try:
            return self.kube.request(method, path, body, content_type)
        except ApiError as exc:
            if exc.status == missing:
                return None
            raise

    def get_job(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._answer("GET", self._job_path(kind, namespace, name), missing=404)

    def get_job_at(self, kind: str, namespace: str, name: str, revision: str) -> dict[str, Any] | None:
        """The job as it was at `revision` (its resourceVersion then), read from the apiserver's history
        with an exact-revision list; None when the job did not exist then or the revision is compacted."""
        info = kind_info(kind)
        query = urllib.parse.urlencode(
            {
                "fieldSelector": f"metadata.name={name}",
                "resourceVersion": revision,
                "resourceVersionMatch": "Exact",
            }
        )
        path = f"/apis/kubeflow.org/v1/namespaces/{_quoted(namespace)}/{info.plural}?{query}"
        try:
            listing = self.kube.request("GET", path)
        except ApiError as exc:
            if exc.status in (400, 404, 410):  # not a revision, no such namespace, or compacted
                return None
            raise
        items = (listing or {}).get("items") or []
        return dict(items[0]) if len(items) == 1 else None

    def delete_job(self, job: dict[str, Any]) -> bool:
        info = kind_info(str(job["kind"]))
        meta = job["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": meta.get("uid")},
        }
        path = self._job_path(info.kind, meta.get("namespace") or "default", meta["name"])
        try:
            self.kube.request("DELETE", path, body)
        except ApiError as exc:
            # Already gone, or a successor with another UID: both mean our job no longer exists.
            if exc.status not in (404, 409):
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
    @staticmethod
    def _event_path(namespace: str, name: str = "") -> str:
        base = f"/api/v1/namespaces/{_quoted(namespace)}/events"
        return f"{base}/{_quoted(name)}" if name else base

    def create_event(self, namespace: str, event: dict[str, Any]) -> bool:
        """POST an Event; False if one of that name exists already (409)."""
        return self._answer("POST", self._event_path(namespace), event, missing=409) is not None

    def get_event(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Event as stored, read with an empty merge patch: the apiserver writes nothing for a no-op
        patch and answers with the object, so the hooks' RBAC needs only create and patch on events."""
        path = self._event_path(namespace, name)
        return self._answer("PATCH", path, {}, content_type=MERGE_PATCH, missing=404)

    def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        """A merge patch; False on a conflict (the patch carries a resourceVersion precondition)."""
        path = self._event_path(namespace, name)
        return self._answer("PATCH", path, patch, content_type=MERGE_PATCH, missing=409) is not None


def default_deleter(kubeconfig: str) -> Deleter | None:
    """The API client for TTL deletion and Events (through `kubeconfig`, the settings' TRAINOP_KUBECONFIG,
    or "" for the pod's ServiceAccount), or None when this process has no credentials.

    The shared client re-reads a ServiceAccount token for every request: the kubelet rotates it.
    """
    if not (
        kubeconfig or (os.environ.get("KUBERNETES_SERVICE_HOST") and (SERVICE_ACCOUNT / "token").exists())
    ):
        return None
    return ApiClient(dataclasses.replace(connect(kubeconfig), timeout=TIMEOUT_SECONDS))
