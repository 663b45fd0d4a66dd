"""Small builders for jobs and AdmissionReviews, and the clock the tests share, so tests state only what
they are about. Every folder's helpers build on these (tests/controller/fakes.py, tests/realistic.py,
tests/local/runs.py, tests/ui/helpers.py, tests/webhooks/helpers.py) instead of a copy of their own."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from trainop.frameworks import kind_info
from trainop.jsontypes import Json

# The tests' "now": syncs, TTLs, rate limits and records are computed from it, never from the clock.
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
STAMP0 = "2024-05-01T12:00:00Z"
# Metacontroller's annotation on every child it created: what it applied last.
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def container(name: str, image: str = "busybox:1.36", **extra: Any) -> Json:
    return {"name": name, "image": image, **extra}


def replica(kind: str, replicas: int | None = 1, containers: list[Json] | None = None, **extra: Any) -> Json:
    """A replica spec whose pod runs the kind's default container unless `containers` says otherwise."""
    spec: Json = {
        "template": {"spec": {"containers": containers or [container(kind_info(kind).default_container)]}}
    }
    if replicas is not None:
        spec["replicas"] = replicas
    spec.update(extra)
    return spec


def job(kind: str, name: str = "job", namespace: str = "default", **types: Json | int) -> Json:
    """`job("PyTorchJob", Master=1, Worker=2)`: ints become default replica specs of that size."""
    specs = {t: replica(kind, v) if isinstance(v, int) else copy.deepcopy(v) for t, v in types.items()}
    return document(kind, {"name": name, "namespace": namespace, "uid": f"uid-{name}"}, specs)


def document(kind: str, metadata: Json, specs: Json) -> Json:
    """The job with exactly this metadata and these replica specs: what a user's file holds."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": metadata,
        "spec": {kind_info(kind).replica_field: specs},
    }


def with_spec(obj: Json, **fields: Any) -> Json:
    out = copy.deepcopy(obj)
    out["spec"].update(fields)
    return out


def with_run_policy(obj: Json, **fields: Any) -> Json:
    out = copy.deepcopy(obj)
    out["spec"].setdefault("runPolicy", {}).update(fields)
    return out


def review_uid(obj: Json, operation: str, old: Json | None) -> str:
    """A uid that is a function of what is reviewed: the fuzz suites build their seeds from reviews, and a
    random uid would make every process draw different examples (tests/test_fuzz_determinism.py)."""
    text = json.dumps([obj, operation, old], sort_keys=True, default=repr)
    return str(uuid.uuid5(uuid.NAMESPACE_URL, text))


def admission_review(obj: Json, operation: str = "CREATE", old: Json | None = None) -> Json:
    info = kind_info(obj["kind"])
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": review_uid(obj, operation, old),
            "kind": {"group": "kubeflow.org", "version": "v1", "kind": info.kind},
            "resource": {"group": "kubeflow.org", "version": "v1", "resource": info.plural},
            "name": obj.get("metadata", {}).get("name"),
            "namespace": obj.get("metadata", {}).get("namespace"),
            "operation": operation,
            "userInfo": {"username": "tester"},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        },
    }
