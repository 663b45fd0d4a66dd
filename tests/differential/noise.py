"""What Kubeflow v1.9.4 does differently from one run to the next, so no operator can match it byte for byte.

Each rule was seen in the self-check (selfcheck.py: Kubeflow against Kubeflow, same cases) and is traced
to Kubeflow's source. A rule accepts a difference only in the direction the randomness goes (Kubeflow
leaves something out or adds a spurious Warning; our side is deterministic), so a difference where our
side is the one missing something is still reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deliberate import Selector
from diff import ABSENT, Difference

# client-go's EventSourceObjectSpamFilter: 25 Events per (source, object), then one per 5 minutes.
SPAM_FILTER_BURST = 25


@dataclass(frozen=True)
class Noise:
    id: str
    why: str
    selectors: tuple[Selector, ...]
    # Further condition on Kubeflow's snapshot at that checkpoint.
    when: Callable[[dict[str, Any]], bool] = lambda snapshot: True


RULES = (
    Noise(
        "kubeflow-event-spam-filter",
        "Kubeflow re-records ExitedWithCode and the like on every reconcile; once a job has had 25 "
        "emissions, client-go's spam filter drops the rest, so which later Events exist depends on how often "
        "it reconciled. Accepted only when Kubeflow's side reached the burst.",
        (Selector(path="events[*", kubeflow=ABSENT),),
        lambda snapshot: int(snapshot.get("_eventEmissions") or 0) >= SPAM_FILTER_BURST,
    ),
    Noise(
        "kubeflow-replica-selector-map-order",
        "PyTorch/Paddle/JAX controllers set each replicaStatuses selector in a loop over the replica map and "
        "return as soon as the job succeeds; Go's map order is random, so a type after the deciding one "
        "keeps no selector in about half the runs (pytorchjob_controller.go updateGeneralJobStatus).",
        (Selector(path="job.status.replicaStatuses.*.selector", kubeflow=ABSENT),),
    ),
    Noise(
        "kubeflow-stale-cache-create",
        "Kubeflow's controllers create children from a stale informer cache and report the 'already exists' "
        "error of their own earlier create as a Warning (control/pod_control.go, service_control.go, "
        "mpijob_controller.go getOrCreateWorker/Launcher); MPI's FailedCreatePod then has an empty pod name.",
        (
            Selector(path="events[Warning MPIJobFailed: * already exists]", trainop=ABSENT),
            Selector(path="events[Warning FailedCreatePod: Created worker pod: ]", trainop=ABSENT),
            Selector(
                path="events[Warning FailedCreatePod: Error creating: * already exists]", trainop=ABSENT
            ),
            Selector(
                path="events[Warning FailedCreateService: Error creating: * already exists]", trainop=ABSENT
            ),
        ),
    ),
    Noise(
        "kubeflow-tfjob-restart-counted-as-failure",
        "A TFJob under restartPolicy Always or OnFailure whose Worker fails is restarted (common/pod.go "
        "deletes the pod and sets Restarting), but TF's UpdateJobStatus fails the job whenever it counts a "
        "failed Worker while the job's conditions hold no Restarting (tfjob_controller.go, the failed > 0 "
        "branch): a reconcile whose informer cache still shows the failed pod after a Running update "
        "replaced Restarting fails a job the previous reconcile was restarting. It needs that cache lag, so "
        "it shows under load only (a fresh-clone run on 2 busy cores; never in isolated runs). That branch "
        "records the TFJobFailed Event before the status write that stores the Failed condition, so a run "
        "may keep the Event without the condition. Accepted only when Kubeflow's side shows either.",
        (
            Selector(path="*", case="restart-always-tfjob-worker-fails", checkpoint="worker-failed"),
            Selector(path="*", case="restart-onfailure-tfjob-worker-fails", checkpoint="worker-failed"),
        ),
        lambda snapshot: _failed_as(snapshot, "TFJobFailed") or _recorded(snapshot, "Normal TFJobFailed: "),
    ),
    Noise(
        "scheduler-binds-a-deleted-pod",
        "kube-scheduler records a SchedulerError Warning on a pod it had placed when the pod is deleted "
        "between its placement and its binding (the binding is refused: 'is being deleted, cannot be "
        "assigned to a host'). Whether a restarted pod is caught that way depends on how the operator's "
        "delete interleaves with the scheduler's cycle, not on what the operator decides; seen under load "
        "on Kubeflow's side of a Worker restart. The scheduler's, so accepted on either side.",
        (
            Selector(
                path="events[Warning SchedulerError: * is being deleted, cannot be assigned to a host]",
                trainop=ABSENT,
            ),
            Selector(
                path="events[Warning SchedulerError: * is being deleted, cannot be assigned to a host]",
                kubeflow=ABSENT,
            ),
        ),
    ),
    Noise(
        "kubeflow-ttl-double-delete",
        "After deleting a job whose TTL expired, a queued reconcile of the same job deletes it again and "
        "records the 'not found' error as a Warning (common/job.go CleanupJob).",
        (Selector(path="events[Warning FailedDeletePod: Error deleting: * not found]", trainop=ABSENT),),
    ),
)


def _failed_as(snapshot: dict[str, Any], reason: str) -> bool:
    status = (snapshot.get("job") or {}).get("status") or {}
    return any(
        c.get("type") == "Failed" and c.get("status") == "True" and c.get("reason") == reason
        for c in status.get("conditions") or []
    )


def _recorded(snapshot: dict[str, Any], prefix: str) -> bool:
    return any(str(e).startswith(prefix) for e in snapshot.get("events") or [])


def explain(d: Difference, kubeflow_snapshot: dict[str, Any]) -> str | None:
    for rule in RULES:
        fields = (d.case, d.checkpoint, d.path, d.kubeflow, d.trainop)
        if any(s.matches(*fields) for s in rule.selectors) and rule.when(kubeflow_snapshot):
            return rule.id
    return None
