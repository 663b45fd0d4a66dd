"""The AdmissionReview v1 contract as pure functions: request bytes in, response document out.

Flask (webhooks/app.py) only moves bytes and logs; everything a webhook decides happens here, on plain
data, so the contract is testable without HTTP. Defaulting and validation themselves are the admission
step (trainop.admission.admit) shared with the sync hook and `trainop run`; this module adapts them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Final

import jsonpatch

from trainop.admission.admit import admit
from trainop.api.kinds import KindInfo
from trainop.frameworks import KINDS
from trainop.jsonshape import MAX_DEPTH, BadRequest, deeper_than
from trainop.jsontypes import Json
from webhooks import codec

REVIEW_API_VERSION: Final = "admission.k8s.io/v1"
REVIEW_KIND: Final = "AdmissionReview"
OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")
# Operations that carry an object worth defaulting or validating; we register only these.
ADMITTED_OPERATIONS: Final = ("CREATE", "UPDATE")


@dataclass(frozen=True)
class AdmissionRequest:
    uid: str
    info: KindInfo
    operation: str
    object: Json | None
    old_object: Json | None
    dry_run: bool
    name: str
    namespace: str


def parse_review(body: bytes) -> AdmissionRequest:
    try:
        review = codec.loads(body)
    except ValueError as exc:
        raise BadRequest(f"body is not valid JSON: {_one_line(str(exc))}") from None
    return parse_review_document(review)


def parse_review_document(review: Any) -> AdmissionRequest:
    if not isinstance(review, dict):
        raise BadRequest(f"body must be a JSON object (an AdmissionReview), got {_json_type(review)}")
    if review.get("apiVersion") != REVIEW_API_VERSION or review.get("kind") != REVIEW_KIND:
        raise BadRequest(
            f'expected apiVersion "{REVIEW_API_VERSION}" and kind "{REVIEW_KIND}", got '
            f"{_short(review.get('apiVersion'))} and {_short(review.get('kind'))}; "
            "register the webhook with admissionReviewVersions: [v1]"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadRequest("missing request: the AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadRequest("missing request.uid: it must be a non-empty string")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise BadRequest(f"request.operation must be one of {', '.join(OPERATIONS)}, got {_short(operation)}")
    obj = _object_field(request, "object", required=operation != "DELETE")
    old = _object_field(request, "oldObject", required=operation == "UPDATE")
    info = _kind_of(request, obj)
    meta = obj.get("metadata") if obj is not None else None
    meta = meta if isinstance(meta, dict) else {}
    return AdmissionRequest(
        uid=uid,
        info=info,
        operation=operation,
        object=obj,
        old_object=old,
        dry_run=request.get("dryRun") is True,
        name=_first_str(request.get("name"), meta.get("name"), meta.get("generateName")),
        namespace=_first_str(request.get("namespace"), meta.get("namespace")),
    )


def _object_field(request: Json, key: str, required: bool) -> Json | None:
    value = request.get(key)
    if value is None:
        if required:
            operation = request.get("operation")
            raise BadRequest(f"missing request.{key}: a {operation} review must carry the {key}")
        return None
    if not isinstance(value, dict):
        raise BadRequest(f"request.{key} must be a JSON object, got {_json_type(value)}")
    if deeper_than(value, MAX_DEPTH):
        # Defaulting copies the object and the patch diffs it, both recursively.
        raise BadRequest(f"request.{key} is nested deeper than {MAX_DEPTH} levels")
    return value


def _kind_of(request: Json, obj: Json | None) -> KindInfo:
    declared = request.get("kind")
    declared_kind = declared.get("kind") if isinstance(declared, dict) else None
    # The object's own kind decides; request.kind only matters for DELETE, which carries no object.
    kind = obj.get("kind") if obj is not None else declared_kind
    info = KINDS.get(kind) if isinstance(kind, str) else None
    if info is None:
        source = "request.object.kind" if obj is not None else "request.kind.kind"
        supported = ", ".join(KINDS)
        raise BadRequest(
            f"{source}: unsupported kind {_short(kind)}; this webhook serves {supported} (kubeflow.org/v1)"
        )
    if declared_kind is not None and declared_kind != kind:
        raise BadRequest(
            f"request.kind.kind {_short(declared_kind)} does not match request.object.kind {kind!r}"
        )
    return info


def mutate(req: AdmissionRequest) -> Json:
    """Answer the defaulting webhook: a JSONPatch from the object to its defaulted form."""
    if req.object is None or req.operation not in ADMITTED_OPERATIONS:
        return respond(req.uid, allowed=True)
    # Deprecation warnings come from the validating webhook only: it always runs after this one, and a
    # warning from both would be shown twice by clients that do not de-duplicate.
    return respond(req.uid, allowed=True, patch=json_patch(req.object, admit(req.object).job))


def validate(req: AdmissionRequest) -> Json:
    """Answer the validating webhook. UPDATE compares with oldObject (immutable fields)."""
    if req.object is None or req.operation not in ADMITTED_OPERATIONS:
        return respond(req.uid, allowed=True)
    result = admit(req.object, req.old_object if req.operation == "UPDATE" else None).checks
    if result.ok:
        return respond(req.uid, allowed=True, warnings=result.warnings)
    # The message is the bare field-error list: the apiserver prefixes it with
    # `admission webhook "<name>" denied the request: `, which already says what was rejected.
    status = {"status": "Failure", "code": 422, "reason": "Invalid", "message": result.message}
    return respond(req.uid, allowed=False, status=status, warnings=result.warnings)


def internal_error(uid: str, error: BaseException) -> Json:
    """A denial for a bug in this webhook: the caller still gets a well-formed answer, never an HTTP 500."""
    message = f"internal error in the trainop webhook ({type(error).__name__}); see the webhook log"
    return respond(
        uid,
        allowed=False,
        status={"status": "Failure", "code": 500, "reason": "InternalError", "message": message},
    )


def respond(
    uid: str,
    allowed: bool,
    patch: list[Json] | None = None,
    status: Json | None = None,
    warnings: list[str] | None = None,
) -> Json:
    response: Json = {"uid": uid, "allowed": allowed}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(codec.dumps(patch)).decode("ascii")
    if status is not None:
        response["status"] = status
    if warnings:
        response["warnings"] = list(warnings)
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}


def json_patch(before: Json, after: Json) -> list[Json]:
    """RFC 6902 operations turning `before` into `after`.

    Only the top-level fields that are not the very same object in both are diffed: defaulting shares
    what it leaves unchanged (metadata, status, any unknown field), so a large field it never touches
    costs neither a walk nor a copy here. The operations are those of diffing the whole objects."""
    changed = [k for k in before if k not in after or before[k] is not after[k]]
    changed += [k for k in after if k not in before]
    before = {k: before[k] for k in changed if k in before}
    after = {k: after[k] for k in changed if k in after}
    ops: list[Json] = jsonpatch.make_patch(before, after).patch
    # make_patch diffs lists heuristically; a patch that did not reproduce `after` would silently corrupt
    # the stored object. Check it, and fall back to replacing whole top-level fields.
    if ops and jsonpatch.apply_patch(before, ops) != after:
        return _coarse_patch(before, after)
    return ops


def _coarse_patch(before: Json, after: Json) -> list[Json]:
    ops: list[Json] = [{"op": "remove", "path": _pointer(key)} for key in before if key not in after]
    for key, value in after.items():
        if key not in before:
            ops.append({"op": "add", "path": _pointer(key), "value": value})
        elif before[key] != value:
            ops.append({"op": "replace", "path": _pointer(key), "value": value})
    return ops


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


def _first_str(*values: Any) -> str:
    return next((v for v in values if isinstance(v, str) and v), "")


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return _one_line(text if len(text) <= limit else text[: limit - 3] + "...")


def _one_line(text: str) -> str:
    return " ".join(text.split())
