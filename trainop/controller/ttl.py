"""ttlSecondsAfterFinished: the one computation of a finished job's remaining time, and whether to delete.

The sync computes the remaining time to ask Metacontroller for a resync when it runs out. Deleting is
judged on the apiserver's copy alone: the body of a `/sync` call is only a claim, and anyone who can
reach the hook Service can POST a finished, expired copy of a running job with its real uid. Deleting is
the one thing the hook does with its own credentials, so `verdict` reads every fact from the copy the
hook fetched itself; the claimed job only names which object (and which uid) the caller meant.

What the hook answers must not tell such a caller anything either: whatever the verdict, the sync asks
to be called again after the same `RECHECK_SECONDS`, so the answer to a request is a function of the
request alone (its status and children are computed from it) and never reveals whether the job exists,
has that uid, has finished, or how much of its TTL is left (the server's copy may say otherwise than the
claim, and the caller may have no right to read it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainop.admission.admit import managed_elsewhere
from trainop.api import constants as c
from trainop.api.jsonpath import dig
from trainop.api.times import parse_timestamp
from trainop.job.conditions import is_true
from trainop.jsontypes import Json

# How soon to look again after a sync whose job claims an expired TTL, whatever the server's copy
# said. When it lags the sync that finished the job, Metacontroller writes the finished status after
# the hook answers and that write triggers a sync of its own, so this is only a safety net; when it is
# not expired (its TTL was raised), the change of the job triggers a sync whose own copy says so. A
# deleted job's resync is dropped by Metacontroller.
RECHECK_SECONDS = 5


def ttl_seconds(run_policy: Any) -> int | None:
    """spec.runPolicy.ttlSecondsAfterFinished when it is a usable value (a job that bypassed validation
    may carry anything there)."""
    ttl = run_policy.get("ttlSecondsAfterFinished") if isinstance(run_policy, dict) else None
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        return None
    return ttl


def remaining(ttl: int, completed: str, now: datetime) -> float:
    """Seconds until the TTL of a job completed at `completed` runs out; zero or less once it has.
    Raises ValueError for a completion time that is not a Kubernetes timestamp."""
    return (parse_timestamp(completed) - now).total_seconds() + ttl


@dataclass(frozen=True)
class Verdict:
    delete: bool
    # Why not, for the log line; "" when deleting.
    reason: str = ""


def verdict(claimed: Json, server: Json | None, now: datetime) -> Verdict:
    """Delete only if the server's copy is the claimed object, finished and past its TTL by its own fields."""
    if server is None:
        return Verdict(False, "the job no longer exists")
    claimed_uid = dig(claimed, "metadata", "uid")
    if not claimed_uid or dig(server, "metadata", "uid") != claimed_uid:
        return Verdict(False, "the apiserver's job has another uid than the request's")
    if dig(server, "metadata", "deletionTimestamp"):
        return Verdict(False, "the job is already being deleted")
    if managed_elsewhere(server):
        return Verdict(False, "the job is managed by another controller")
    run_policy = dig(server, "spec", "runPolicy")
    ttl = ttl_seconds(run_policy)
    if ttl is None:
        return Verdict(False, "the apiserver's job has no ttlSecondsAfterFinished")
    if run_policy.get("suspend") is True:
        return Verdict(False, "the job is suspended")
    conditions = dig(server, "status", "conditions")
    conditions = [x for x in conditions if isinstance(x, dict)] if isinstance(conditions, list) else []
    completed = dig(server, "status", "completionTime")
    if not (is_true(conditions, c.SUCCEEDED) or is_true(conditions, c.FAILED)) or not completed:
        return Verdict(False, "the apiserver's job has not finished (yet)")
    try:
        left = remaining(ttl, str(completed), now)
    except ValueError:
        return Verdict(False, f"the apiserver's job has an unreadable completionTime {completed!r}")
    if left > 0:
        return Verdict(False, "the apiserver's job has not reached its TTL")
    return Verdict(True)
