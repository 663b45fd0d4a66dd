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
from typing import Any, Final

from flask import Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from trainop.jsonshape import BadRequest
from webhooks import admission, codec, metrics
from webhooks.admission import AdmissionRequest

Json = dict[str, Any]

MAX_BODY_ENV: Final = "TRAINOP_WEBHOOK_MAX_BODY_BYTES"
MAX_BODY_CONFIG: Final = "TRAINOP_MAX_BODY_BYTES"
# The apiserver itself refuses bodies over 3 MiB; 8 MiB leaves room for its AdmissionReview envelope
# (object and oldObject of an UPDATE) while keeping a stray client from exhausting memory.
DEFAULT_MAX_BODY_BYTES: Final = 8 * 1024 * 1024

log = logging.getLogger("trainop.webhooks")

Handler = Callable[[AdmissionRequest], Json]


def create_app(max_body_bytes: int | None = None) -> Flask:
    codec.log_json_lines(log)
    app = Flask(__name__)
    limit = max_body_bytes if max_body_bytes is not None else _max_body_from_env()
    app.config[MAX_BODY_CONFIG] = limit
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
    try:
        req = admission.parse_review(_read_body())
        entry.update(_describe(req))
        payload = handler(req)
        status = 200
        entry["allowed"] = payload["response"]["allowed"]
    except RequestEntityTooLarge:
        limit = current_app.config[MAX_BODY_CONFIG]
        status, payload = 413, {"error": f"request body exceeds the webhook's limit of {limit} bytes"}
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
    if status != 200:
        entry.setdefault("error", payload["error"])
    elapsed = time.perf_counter() - started
    metrics.record(path.strip("/"), req.operation if req else None, status, payload, elapsed)
    entry.update(status=status, latency_ms=round(elapsed * 1000, 3))
    log.log(logging.ERROR if "traceback" in entry else logging.INFO, codec.dumps(entry).decode())
    return _json(status, payload)


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


def _max_body_from_env() -> int:
    raw = os.environ.get(MAX_BODY_ENV, "")
    if not raw:
        return DEFAULT_MAX_BODY_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{MAX_BODY_ENV} must be a positive number of bytes, got {raw!r}")
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


app = create_app()
