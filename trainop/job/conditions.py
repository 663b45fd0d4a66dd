"""Job condition bookkeeping with Kubeflow's rules, as pure list transformations.

Times are passed in, never read here, and a condition only gets a new time when it changes, so that
resyncing an unchanged job yields a byte-identical status (Metacontroller rewrites the status, and
so triggers another sync, whenever it differs).
"""

from __future__ import annotations

from trainop.api import constants as c
from trainop.jsontypes import Json

TERMINAL = (c.SUCCEEDED, c.FAILED)


def find(conditions: list[Json], ctype: str) -> Json | None:
    return next((x for x in conditions if x.get("type") == ctype), None)


def is_true(conditions: list[Json], ctype: str) -> bool:
    cond = find(conditions, ctype)
    return bool(cond and cond.get("status") == "True")


def finished(conditions: list[Json]) -> bool:
    return any(is_true(conditions, t) for t in TERMINAL)


def set_condition(
    conditions: list[Json], ctype: str, status: str, reason: str, message: str, now: str
) -> list[Json]:
    """Return `conditions` with `ctype` set; Succeeded and Failed are terminal and freeze the list."""
    if finished(conditions):
        return conditions
    current = find(conditions, ctype)
    if current and current.get("status") == status and current.get("reason") == reason:
        return conditions
    # A status that lost its lastTransitionTime (another writer) gets a fresh one instead of a KeyError.
    kept = current.get("lastTransitionTime") if current and current.get("status") == status else None
    transition = kept or now
    new = {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": transition,
    }
    kept = []
    for cond in conditions:
        other = cond.get("type")
        if other == ctype or {other, ctype} == {c.RUNNING, c.RESTARTING}:
            continue
        if ctype in TERMINAL and other == c.RUNNING:
            cond = {**cond, "status": "False"}
        kept.append(cond)
    return [*kept, new]
