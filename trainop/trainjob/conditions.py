"""metav1.Condition bookkeeping as the apimachinery helpers do it, which Trainer's TrainJob status uses.

Unlike v1 jobs' conditions, these keep their place in the list, carry no lastUpdateTime, and change
lastTransitionTime only when the status changes.
"""

from __future__ import annotations

from trainop.jsontypes import Json


def find(conditions: list[Json], ctype: str) -> Json | None:
    return next((x for x in conditions if x.get("type") == ctype), None)


def is_true(conditions: list[Json], ctype: str) -> bool:
    cond = find(conditions, ctype)
    return bool(cond and cond.get("status") == "True")


def set_condition(conditions: list[Json], new: Json, now: str) -> list[Json]:
    """``conditions`` with ``new`` set in place (or appended), keeping the transition time unless the
    status changes; a new condition without a transition time gets ``now``."""
    shaped = _shaped(new)
    existing = find(conditions, str(new["type"]))
    if existing is None:
        return [*conditions, {**shaped, "lastTransitionTime": new.get("lastTransitionTime") or now}]
    updated = {**shaped, "lastTransitionTime": existing.get("lastTransitionTime") or now}
    if existing.get("status") != new.get("status"):
        updated["lastTransitionTime"] = new.get("lastTransitionTime") or now
    return [updated if c is existing else c for c in conditions]


def _shaped(cond: Json) -> Json:
    # reason and message are always written (empty strings included); observedGeneration only when set.
    out: Json = {
        "type": cond["type"],
        "status": cond.get("status"),
        "reason": cond.get("reason") or "",
        "message": cond.get("message") or "",
    }
    if cond.get("observedGeneration"):
        out["observedGeneration"] = cond["observedGeneration"]
    return out


def without(conditions: list[Json], ctype: str) -> list[Json]:
    return [c for c in conditions if c.get("type") != ctype]
