"""The webhook server's Prometheus metrics: admission latency per operation, denials per reason.

Label values are bounded whatever a client sends: parsing admits only Kubernetes' four operations, and
denied fields outside the kinds' own spec fields collapse into their parent.
"""

from __future__ import annotations

import re

from prometheus_client import Counter, Histogram

from trainop.frameworks import FRAMEWORKS
from trainop.jsontypes import Json

TOP_LEVEL = ("apiVersion", "kind", "metadata", "spec")
# Every field a job spec of any kind may have; the second step of a denied field path is kept if known.
SPEC_FIELDS = frozenset(
    name for fw in FRAMEWORKS.values() for name in fw.spec_model.model_json_schema()["properties"]
)
METADATA_FIELDS = frozenset(("name", "generateName", "namespace", "labels", "annotations"))

LATENCY = Histogram(
    "trainop_webhook_admission_duration_seconds",
    "Time to answer one AdmissionReview, from body read to response encoded",
    ("webhook", "operation"),
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
)
DENIALS = Counter(
    "trainop_webhook_denials_total",
    "Denied admissions by status reason (Invalid, InternalError) and the first field at fault",
    ("webhook", "reason", "field"),
)
REQUESTS = Counter(
    "trainop_webhook_requests_total", "Requests by webhook and HTTP status code", ("webhook", "code")
)


def denied_field(message: str) -> str:
    """`spec.pytorchReplicaSpecs[Worker].replicas: ...; ...` -> `spec.pytorchReplicaSpecs`."""
    path = re.sub(r"\[[^\]]*\]", "", message.split(": ", 1)[0]).split(".")
    if path[0] not in TOP_LEVEL:
        return "other"
    known = SPEC_FIELDS if path[0] == "spec" else METADATA_FIELDS if path[0] == "metadata" else ()
    return ".".join(path[:2]) if len(path) > 1 and path[1] in known else path[0]


def record(webhook: str, operation: str | None, code: int, payload: Json, seconds: float) -> None:
    REQUESTS.labels(webhook, str(code)).inc()
    if operation is None:
        return
    LATENCY.labels(webhook, operation).observe(seconds)
    response = payload.get("response") or {}
    if response.get("allowed") is False:
        status = response.get("status") or {}
        reason = status.get("reason") if status.get("reason") in ("Invalid", "InternalError") else "other"
        DENIALS.labels(webhook, reason, denied_field(str(status.get("message") or ""))).inc()
