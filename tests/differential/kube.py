"""A tiny REST client for the differential test: one apiserver, JSON in and out, client-certificate auth.

kubectl costs ~0.1 s of CPU per call; the differential run takes thousands of snapshots on two
clusters at once on 2 cores, so it talks HTTP directly (standard library only).
"""

from __future__ import annotations

import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import Any


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class Api:
    def __init__(self, server: str, ctx: ssl.SSLContext) -> None:
        self.server = server.rstrip("/")
        # No proxy: every request goes to 127.0.0.1.
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx)
        )

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with self._opener.open(req, timeout=30) as resp:
                out: dict[str, Any] = json.loads(resp.read() or b"{}")
                return out
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                message = str(json.loads(raw).get("message", raw.decode(errors="replace")))
            except ValueError:
                message = raw.decode(errors="replace")
            raise ApiError(e.code, message) from None

    def get(self, path: str) -> dict[str, Any] | None:
        """The object, or None when the apiserver says 404."""
        try:
            return self.request("GET", path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def items(self, path: str) -> list[dict[str, Any]]:
        found = self.get(path)
        return list(found.get("items") or []) if found else []

    def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, obj)

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self.request("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, path: str) -> None:
        try:
            self.request("DELETE", path)
        except ApiError as e:
            if e.status != 404:
                raise


class QueueWatch:
    """Whether an operator has nothing queued and nothing in flight, from its Prometheus metrics.

    Both controller-runtime (Kubeflow) and Metacontroller (which registers into controller-runtime's
    registry) publish client-go's workqueue metrics: ``workqueue_depth`` (items waiting) and
    ``workqueue_unfinished_work_seconds`` (work started and not done). Both at zero means everything
    enqueued before this moment has been handled. One scrape serves every caller for ``ttl`` seconds.
    """

    METRICS = ("workqueue_depth{", "workqueue_unfinished_work_seconds{")

    def __init__(self, url: str, ttl: float = 0.5) -> None:
        self.url = url
        self.ttl = ttl
        self._lock = threading.Lock()
        self._at = 0.0
        self._idle = False
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def scrape(self) -> str:
        with self._opener.open(self.url, timeout=10) as resp:
            return str(resp.read().decode())

    def busy(self) -> float:
        """Queued items plus seconds of unfinished work, summed over every queue."""
        total = 0.0
        for line in self.scrape().splitlines():
            if line.startswith(self.METRICS):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def idle(self) -> bool:
        with self._lock:
            if time.monotonic() - self._at > self.ttl:
                self._idle = self.busy() == 0
                self._at = time.monotonic()
            return self._idle
