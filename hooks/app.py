"""flask app serving Metacontroller's sync and finalize hooks; it only parses, calls `sync` and serialises."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from flask import Flask, Response, request

from hooks import metrics
from hooks.kubeapi import ApiClient, Deleter, default_deleter
from hooks.recorder import Recorder
from hooks.request import HookRequest, parse
from trainop.controller import ttl
from trainop.controller.sync import sync
from trainop.job.settings import Settings
from trainop.jsonshape import BadRequest

log = logging.getLogger("trainop.hooks")
# A resync of a 1000-replica TFJob is ~82 MiB: TF_CONFIG names every replica in every pod, and
# Metacontroller's last-applied annotation repeats it (bench/README.md). One such sync costs a worker
# ~250 MiB; the chart's 1536Mi pod limit holds a few at once. Larger TFJobs need TRAINOP_HOOK_MAX_BODY_BYTES.
DEFAULT_MAX_BODY = 128 * 1024 * 1024


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def _loads(data: bytes) -> Any:
    return orjson.loads(data)


def _json(obj: Any, status: int = 200) -> Response:
    return Response(_dumps(obj), status=status, mimetype="application/json")


@dataclass(frozen=True)
class HookServer:
    """What answering a hook call needs; the flask routes below only hand it the request body."""

    settings: Settings
    deleter: Deleter | None
    clock: Callable[[], datetime]
    recorder: Recorder | None

    def answer(self, path: str, data: bytes, finalizing_route: bool) -> Response:
        started = time.perf_counter()
        try:
            hook = parse(_loads(data))
        except (orjson.JSONDecodeError, ValueError, BadRequest) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "empty body"
            prefix = "" if isinstance(exc, BadRequest) else "invalid JSON: "
            log.info(json.dumps({"path": path, "code": 400, "error": prefix + reason}))
            return _json({"error": prefix + reason}, 400)
        parent = hook.parent
        if finalizing_route or hook.finalizing:
            response = self.finalize(hook)
        else:
            response = self.sync(parent, hook.children)
        out = _json(response)
        elapsed = time.perf_counter() - started
        metrics.record_call(path.strip("/"), parent["kind"], elapsed, len(data))
        meta = parent["metadata"]
        entry = {
            "path": path,
            "kind": parent["kind"],
            "namespace": meta.get("namespace"),
            "name": meta["name"],
        }
        log.info(
            json.dumps(
                {**entry, "children": len(response["children"]), "latency_ms": round(elapsed * 1000, 2)}
            )
        )
        return out

    def finalize(self, hook: HookRequest) -> dict[str, Any]:
        observed = any(hook.children.get(k) for k in hook.children)
        return {"status": hook.parent.get("status") or {}, "children": [], "finalized": not observed}

    def sync(self, parent: dict[str, Any], children: dict[str, dict[str, Any]]) -> dict[str, Any]:
        now = self.clock()
        result = sync(parent, children, self.settings, now)
        response = result.response()
        metrics.record_transitions(parent, result.status)
        if self.recorder is not None and result.events:
            self.recorder.submit(parent, result.events)  # queued: written after the response
        if result.delete_parent:
            retry = self.delete(parent, now)
            if retry is not None:  # never a null: nothing in a response may be None
                response["resyncAfterSeconds"] = retry
        return response

    def delete(self, parent: dict[str, Any], now: datetime) -> float | None:
        """Delete the job if the apiserver's copy of it (never the request's) says its TTL expired. Returns
        when to sync again: the same whatever that copy said (trainop.controller.ttl), or never when this
        process has no credentials to delete with."""
        meta = parent["metadata"]
        if self.deleter is None:
            log.warning(
                "ttlSecondsAfterFinished expired for %s but the hook has no API credentials", meta["name"]
            )
            return None
        try:
            server = self.deleter.get_job(parent["kind"], meta.get("namespace") or "default", meta["name"])
            decision = ttl.verdict(parent, server, now)
            if decision.delete and server is not None:
                if self.recorder is not None:
                    self.recorder.record_deletion(server)
                if self.deleter.delete_job(server):
                    metrics.record_deleted(server)
        except Exception:
            log.exception("deleting %s after its TTL failed; retrying", meta["name"])
            return ttl.RECHECK_SECONDS
        if not decision.delete:
            entry = {"event": "ttl-not-deleted", "kind": parent["kind"], "namespace": meta.get("namespace")}
            log.warning(json.dumps({**entry, "name": meta["name"], "reason": decision.reason}))
        return ttl.RECHECK_SECONDS


def create_app(
    settings: Settings | None = None,
    deleter: Deleter | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    recorder: Recorder | None = None,
) -> Flask:
    server = HookServer(settings or Settings.from_env(), deleter, clock, recorder)
    app = Flask("trainop-hooks")
    app.config["MAX_CONTENT_LENGTH"] = int(os.environ.get("TRAINOP_HOOK_MAX_BODY_BYTES", DEFAULT_MAX_BODY))

    @app.post("/sync")
    def sync_route() -> Response:
        return server.answer(request.path, request.get_data(cache=False), finalizing_route=False)

    @app.post("/finalize")
    def finalize_route() -> Response:
        return server.answer(request.path, request.get_data(cache=False), finalizing_route=True)

    @app.after_request
    def count(response: Response) -> Response:
        metrics.record_response(request.path, response.status_code)
        return response

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"ok": True})

    @app.errorhandler(413)
    def too_large(_: Exception) -> Response:
        return _json({"error": f"request body over {app.config['MAX_CONTENT_LENGTH']} bytes"}, 413)

    @app.errorhandler(404)
    def not_found(_: Exception) -> Response:
        return _json({"error": f"no route {request.path}; use POST /sync or /finalize"}, 404)

    @app.errorhandler(500)
    def internal(_: Exception) -> Response:
        # A bug, not bad input: Metacontroller retries with backoff, and the traceback is in the log.
        return _json(
            {"error": "internal error while computing the sync response; see the hook server log"}, 500
        )

    @app.errorhandler(405)
    def wrong_method(_: Exception) -> Response:
        return _json({"error": f"{request.method} not allowed on {request.path}"}, 405)

    return app


def _app() -> Flask:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    client = default_deleter()
    recorder = Recorder(client) if isinstance(client, ApiClient) else None
    return create_app(deleter=client, recorder=recorder)


app = _app()
