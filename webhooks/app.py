"""The webhook HTTP server: `POST /mutate`, `POST /validate`, `GET /healthz`.

Flask only reads bytes, calls the pure functions in webhooks.admission, serialises and logs. The rule at
this layer: every request gets a JSON answer and no status is ever 5xx. A 5xx (or a dead worker) makes
the apiserver apply the webhook's failurePolicy, which for validation is Fail, so a bug here would
block every job in the cluster with an opaque "failed calling webhook" error.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections.abc import Callable
from typing import Final

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from trainop.jsoncost import Budget, Claim, TooCostly, check_parse_cost
from trainop.jsonshape import BadRequest
from trainop.jsontypes import Json
from webhooks import admission, codec, metrics
from webhooks.admission import AdmissionRequest
from webhooks.settings import MAX_BODY, MAX_INFLIGHT, WebhookLimits, current

MAX_BODY_CONFIG: Final = "TRAINOP_MAX_BODY_BYTES"
# The limits and their variables are webhook settings (webhooks.settings).
DEFAULT_MAX_BODY_BYTES: Final = MAX_BODY.default
# How long a request waits for the budget before a 429: well inside the apiserver's 10 s webhook timeout.
BUDGET_WAIT_SECONDS: Final = 2.0
BUDGET_CONFIG: Final = "TRAINOP_INFLIGHT_BUDGET"

log = logging.getLogger("trainop.webhooks")

Handler = Callable[[AdmissionRequest], Json]


def create_app(
    max_body_bytes: int | None = None, inflight_bytes: int | None = None, limits: WebhookLimits | None = None
) -> Flask:
    """The app; without `limits`, read from the environment now (tests; the server's own app is built
    once from webhooks.settings.current()). A number given replaces its limit."""
    codec.log_json_lines(log)
    app = Flask(__name__)
    limits = limits or WebhookLimits.from_env(os.environ)
    limit = max_body_bytes if max_body_bytes is not None else limits.max_body_bytes
    app.config[MAX_BODY_CONFIG] = limit
    inflight = inflight_bytes if inflight_bytes is not None else limits.max_inflight_bytes
    app.config[BUDGET_CONFIG] = Budget(inflight)
    # One byte over the limit: werkzeug silently truncates a chunked body at MAX_CONTENT_LENGTH, so the
    # extra byte is how _read_body tells "exactly at the limit" from "over it".
    app.config["MAX_CONTENT_LENGTH"] = limit + 1

    @app.post("/mutate")
    def mutate() -> Response:
        return _admit("/mutate", admission.mutate)

    @app.post("/validate")
    def validate() -> Response:
        return _admit("/validate", admission.validate)

    @app.get("/healthz")
    def healthz() -> Response:
        return _json(200, {"status": "ok"})

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        # 404/405 etc. as JSON, like everything else this server says.
        code = exc.code or 400
        return _json(code if code < 500 else 400, {"error": _one_line(exc.description or exc.name)})

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:  # pragma: no cover - _admit already catches everything
        entry = {"path": request.path, "error": repr(exc), "traceback": traceback.format_exc()}
        log.error(codec.dumps(entry).decode())
        return _json(400, {"error": "the webhook could not process this request; see its log"})

    return app


def _admit(path: str, handler: Handler) -> Response:
    started = time.perf_counter()
    entry: Json = {"path": path}
    req: AdmissionRequest | None = None
    claim = Claim(current_app.config[BUDGET_CONFIG])
    try:
        # The parse estimate is held once the body is read, not its declared length before: the port is
        # open to every pod, and connections that declare 8 MiB and then trickle would otherwise hold the
        # budget and turn real reviews away. Bodies being read take at most threads x the body limit.
        data = _read_body()
        _hold(claim, check_parse_cost(data, claim.budget.limit))
        req = admission.parse_review(data)
        entry.update(_describe(req))
        payload = handler(req)
        status = 200
        entry["allowed"] = payload["response"]["allowed"]
    except RequestEntityTooLarge:
        limit = current_app.config[MAX_BODY_CONFIG]
        status, payload = 413, {"error": f"request body exceeds the webhook's limit of {limit} bytes"}
    except TooCostly as exc:
        status, payload = 413, {"error": str(exc)}
    except Busy as exc:
        status, payload = 429, {"error": str(exc)}
    except BadRequest as exc:
        status, payload = 400, {"error": str(exc)}
    except HTTPException as exc:
        # werkzeug's own refusals while reading the body, e.g. a client that disconnected mid-request.
        status, payload = 400, {"error": _one_line(exc.description or exc.name)}
    except Exception as exc:
        # A bug in defaulting or validation. Answer the review (denied, with a pointer to this log) if we
        # know its uid; the traceback goes into the request's log line so the line stays one JSON object.
        entry.update(error=repr(exc), traceback=traceback.format_exc())
        if req is None:
            status, payload = 400, {"error": "the webhook could not parse this AdmissionReview; see its log"}
        else:
            status, payload = 200, admission.internal_error(req.uid, exc)
            entry["allowed"] = False
    finally:
        claim.release()
    if status != 200:
        entry.setdefault("error", payload["error"])
    elapsed = time.perf_counter() - started
    metrics.record(path.strip("/"), req.operation if req else None, status, payload, elapsed)
    entry.update(status=status, latency_ms=round(elapsed * 1000, 3))
    log.log(logging.ERROR if "traceback" in entry else logging.INFO, codec.dumps(entry).decode())
    response = _json(status, payload)
    if status == 429:
        response.headers["Retry-After"] = "1"
    return response


class Busy(Exception):
    """This worker's parse budget stayed taken for BUDGET_WAIT_SECONDS; for an HTTP 429."""


def _hold(claim: Claim, cost: int) -> None:
    if not claim.grow(cost, BUDGET_WAIT_SECONDS):
        raise Busy(
            f"the webhook is busy parsing other requests ({claim.budget.held} of its {claim.budget.limit} "
            f"bytes of parse budget, {MAX_INFLIGHT.name}); retry"
        )


def _read_body() -> bytes:
    data = request.get_data(cache=False)
    if len(data) > current_app.config[MAX_BODY_CONFIG]:
        raise RequestEntityTooLarge()
    return data


def _describe(req: AdmissionRequest) -> Json:
    return {
        "uid": req.uid,
        "kind": req.info.kind,
        "namespace": req.namespace,
        "name": req.name,
        "operation": req.operation,
        "dry_run": req.dry_run,
    }


def _json(status: int, payload: Json) -> Response:
    return Response(codec.dumps(payload), status=status, mimetype="application/json")


def _one_line(text: str) -> str:
    return " ".join(text.split())


app = create_app(limits=current().limits)
