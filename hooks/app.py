"""flask app serving Metacontroller's sync, finalize and customize hooks; it only parses, calls the core
and serialises."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import orjson
from flask import Flask, Response, request

from hooks import metrics
from hooks.bodycost import Allowance, body_cost, check_children, too_many_children
from hooks.kubeapi import ApiClient, Deleter, default_deleter
from hooks.recorder import Recorder
from hooks.request import TRAINJOB, HookRequest, parse, parse_customize
from hooks.settings import MAX_BODY, MAX_INFLIGHT, MAX_RESPONSE, HookSettings, current
from trainop.controller import ttl
from trainop.controller.related import related_resources
from trainop.controller.sync import sync
from trainop.job.settings import Settings
from trainop.jsoncost import Budget, Claim, TooCostly
from trainop.jsonshape import BadRequest
from trainop.trainjob import hook as trainjob_hook
from trainop.trainjob import sync as trainjob_sync

log = logging.getLogger("trainop.hooks")
T = TypeVar("T")
# The limits and their variables are hook settings (hooks.settings).
DEFAULT_MAX_BODY = MAX_BODY.default
# How long a request waits for the parse budget (TRAINOP_HOOK_MAX_INFLIGHT_BYTES) before a 429
# (Metacontroller retries it with backoff).
BUDGET_WAIT_SECONDS = 1.0
BUDGET_CONFIG = "TRAINOP_INFLIGHT_BUDGET"


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def _loads(data: bytes) -> Any:
    return orjson.loads(data)


def _parsed(path: str, data: bytes, parser: Callable[[Any], T]) -> T | Response:
    """The request `parser` reads from the body, or the 400 that says why it cannot."""
    try:
        return parser(_loads(data))
    except (orjson.JSONDecodeError, ValueError, BadRequest) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "empty body"
        prefix = "" if isinstance(exc, BadRequest) else "invalid JSON: "
        log.info(json.dumps({"path": path, "code": 400, "error": prefix + reason}))
        return _json({"error": prefix + reason}, 400)


def _json(obj: Any, status: int = 200) -> Response:
    return Response(_dumps(obj), status=status, mimetype="application/json")


@dataclass(frozen=True)
class HookServer:
    """What answering a hook call needs; the flask routes below only hand it the request body."""

    settings: Settings
    deleter: Deleter | None
    clock: Callable[[], datetime]
    recorder: Recorder | None
    max_response: int = MAX_RESPONSE.default

    def answer(
        self, path: str, data: bytes, finalizing_route: bool, allowance: Allowance | None = None
    ) -> Response:
        """The hook's answer to `data`; `allowance`, what its job's children may be (hooks.bodycost)."""
        started = time.perf_counter()
        hook = _parsed(path, data, parse)
        if isinstance(hook, Response):
            return hook
        observed = sum(len(group) for group in hook.children.values())
        if allowance is not None:
            error = too_many_children(hook.parent, observed, allowance)
            if error:
                log.info(json.dumps({"path": path, "code": 413, "error": error}))
                return _json({"error": error}, 413)
        parent = hook.parent
        meta = parent["metadata"]
        entry = {
            "path": path,
            "kind": parent["kind"],
            "namespace": meta.get("namespace"),
            "name": meta["name"],
        }
        try:
            if finalizing_route or hook.finalizing:
                response = self.finalize(hook)
                body = _dumps(response)
            elif parent["kind"] == TRAINJOB:
                response, body = self.sync_trainjob(hook)
            else:
                response, body = self.sync(parent, hook.children, hook.related)
        except AnswerTooLarge as exc:
            # Not the job's fault (it passed validation) but this server's ceiling: refuse and let
            # Metacontroller retry, so that raising the ceiling lets the job go on unchanged.
            error = (
                f"the answer for {parent['kind']} {meta.get('namespace')}/{meta['name']} would be "
                f"{exc.size} bytes, over this hook server's {MAX_RESPONSE.name}={self.max_response}"
            )
            log.warning(json.dumps({**entry, "code": 503, "error": error, "response_bytes": exc.size}))
            return _json({"error": error}, 503)
        elapsed = time.perf_counter() - started
        metrics.record_call(path.strip("/"), parent["kind"], elapsed, len(data))
        log.info(
            json.dumps(
                {
                    **entry,
                    "observed": observed,
                    "children": len(response["children"]),
                    "latency_ms": round(elapsed * 1000, 2),
                }
            )
        )
        return Response(body, status=200, mimetype="application/json")

    def finalize(self, hook: HookRequest) -> dict[str, Any]:
        observed = any(hook.children.get(k) for k in hook.children)
        return {"status": hook.parent.get("status") or {}, "children": [], "finalized": not observed}

    def customize(self, path: str, data: bytes) -> Response:
        """Metacontroller's customize call: the related objects to send with the job's syncs."""
        started = time.perf_counter()
        hook = _parsed(path, data, parse_customize)
        if isinstance(hook, Response):
            return hook
        if hook.kind == TRAINJOB:
            answer = trainjob_hook.related_resources(hook.parent)
        else:
            answer = related_resources(hook.kind, hook.name, hook.namespace)
        elapsed = time.perf_counter() - started
        metrics.record_call(path.strip("/"), hook.kind, elapsed, len(data))
        entry = {"path": path, "kind": hook.kind, "namespace": hook.namespace, "name": hook.name}
        log.info(json.dumps({**entry, "latency_ms": round(elapsed * 1000, 2)}))
        return _json(answer)

    def sync(
        self,
        parent: dict[str, Any],
        children: dict[str, dict[str, Any]],
        related: dict[str, dict[str, Any]] | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        """The answer and its bytes; AnswerTooLarge, before any Event, metric or deletion, when too big."""
        now = self.clock()
        result = sync(parent, children, self.settings, now, related)
        response = result.response()
        body = _dumps(response)
        if len(body) > self.max_response:
            raise AnswerTooLarge(len(body))
        transitions = metrics.transitions(parent, result.status)
        if self.recorder is not None and (result.events or transitions):
            # Queued: checked against the apiserver's copy, then written and counted, after the response.
            self.recorder.submit(parent, result.events, transitions)
        if result.delete_parent:
            retry = self.delete(parent, now)
            if retry is not None:  # never a null: nothing in a response may be None
                response["resyncAfterSeconds"] = retry
                body = _dumps(response)
        return response, body

    def sync_trainjob(self, hook: HookRequest) -> tuple[dict[str, Any], bytes]:
        """A TrainJob's answer: its runtime snapshot and JobSet, and its status (trainop.trainjob.sync)."""
        observed = trainjob_hook.observed(hook.parent, hook.children, hook.related)
        outcome = trainjob_sync.sync(observed, self.clock())
        response = trainjob_hook.response(outcome)
        body = _dumps(response)
        if len(body) > self.max_response:
            raise AnswerTooLarge(len(body))
        meta = hook.parent["metadata"]
        for event in outcome.events:
            # Trainer records these through events.k8s.io; until the recorder writes that API they are
            # logged, never dropped.
            entry = {"event": "trainjob-event", "namespace": meta.get("namespace"), "name": meta["name"]}
            log.warning(
                json.dumps({**entry, "type": event.type, "reason": event.reason, "message": event.message})
            )
        return response, body

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
    hook_settings: HookSettings | None = None,
) -> Flask:
    """The app; without `hook_settings`, read from the environment now (tests; the server's own app is
    built once from hooks.settings.current()). `settings`, if given, replaces theirs for the sync."""
    config = hook_settings or HookSettings.from_env(os.environ)
    limits = config.limits
    server = HookServer(settings or config.sync, deleter, clock, recorder, limits.max_response_bytes)
    app = Flask("trainop-hooks")
    app.config["MAX_CONTENT_LENGTH"] = limits.max_body_bytes
    budget = app.config[BUDGET_CONFIG] = Budget(limits.max_inflight_bytes)

    def bounded(handle: Callable[[bytes, Allowance | None], Response]) -> Response:
        # The declared length is held while the body is read, the parse estimate while it is answered.
        claim = Claim(budget)
        try:
            if not claim.grow(request.content_length or 0, BUDGET_WAIT_SECONDS):
                return _busy(budget)
            data = request.get_data(cache=False)
            try:
                cost = body_cost(data, budget.limit)
                if not claim.grow(cost, BUDGET_WAIT_SECONDS):
                    return _busy(budget)
                allowance = check_children(data, cost)
            except TooCostly as exc:
                log.info(json.dumps({"path": request.path, "code": 413, "error": str(exc)}))
                return _json({"error": str(exc)}, 413)
            return handle(data, allowance)
        finally:
            claim.release()

    @app.post("/sync")
    def sync_route() -> Response:
        return bounded(lambda data, allowed: server.answer(request.path, data, False, allowed))

    @app.post("/finalize")
    def finalize_route() -> Response:
        return bounded(lambda data, allowed: server.answer(request.path, data, True, allowed))

    @app.post("/customize")
    def customize_route() -> Response:
        return bounded(lambda data, _: server.customize(request.path, data))

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
        return _json({"error": f"no route {request.path}; use POST /sync, /finalize or /customize"}, 404)

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


class AnswerTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _busy(budget: Budget) -> Response:
    error = (
        f"the hook server is busy parsing other requests ({budget.held} of its {budget.limit} bytes of "
        f"parse budget, {MAX_INFLIGHT.name}); retry"
    )
    log.info(json.dumps({"path": request.path, "code": 429, "error": error}))
    response = _json({"error": error}, 429)
    response.headers["Retry-After"] = "1"
    return response


def _app() -> Flask:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = current()
    client = default_deleter(config.kubeconfig)
    recorder = Recorder(client) if isinstance(client, ApiClient) else None
    return create_app(deleter=client, recorder=recorder, hook_settings=config)


app = _app()
