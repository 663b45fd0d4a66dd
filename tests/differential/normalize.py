"""What of a cluster's state the differential test compares, with the incidental parts taken out.

Kept: every child the operator made (pods, services, configmaps, serviceaccounts, roles, rolebindings,
HPAs) with names, labels, annotations, owner references, spec/data/rules; the job's status (conditions
by type with status, reason and message; replicaStatuses; whether each time is set); the job's Events,
and the Events an operator (Kubeflow's controllers, ours, Metacontroller) recorded about anything else
(the runner compares Events at a case's last checkpoint only).

Taken out, because they differ between any two runs of the same operator: uids, resourceVersions,
timestamps, managedFields, generation and observedGeneration, owner reference uids, allocated cluster
IPs, the random suffix of the service-account token volume, pod status other than its phase (kwok
writes it), HPA status (the controller manager writes it), Metacontroller's own labels and annotations
(``metacontroller.k8s.io/*``), Event counts, times and order (Kubernetes aggregates repeats, and the
order of Kubeflow's Events across its goroutines is not deterministic), and the namespace defaults
(``default`` ServiceAccount, ``kube-root-ca.crt`` ConfigMap).
"""

from __future__ import annotations

import re
from typing import Any

CHILD_KINDS = (
    "Pod",
    "Service",
    "ConfigMap",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "HorizontalPodAutoscaler",
)
NAMESPACE_DEFAULTS = {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")}
INCIDENTAL_PREFIXES = ("metacontroller.k8s.io/",)
CONTROLLER_UID = "controller-uid"
DROPPED_METADATA = (
    "uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
    "deletionGracePeriodSeconds", "namespace",
)  # fmt: skip
# Who records Events for a job: Kubeflow's controllers (and ours, under the same names), Metacontroller.
JOB_KINDS = ("tfjob", "pytorchjob", "xgboostjob", "mpijob", "paddlejob", "jaxjob", "mxjob")
OPERATOR_SOURCES = frozenset({f"{k}-controller" for k in JOB_KINDS} | {"metacontroller"})
TIMES = ("startTime", "completionTime", "lastReconcileTime")
SET = "<set>"
TOKEN_VOLUME = re.compile(r"^kube-api-access-[a-z0-9]+$")


def _without_incidental(mapping: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (mapping or {}).items() if not k.startswith(INCIDENTAL_PREFIXES)}


def metadata(meta: dict[str, Any], job_uid: str | None = None) -> dict[str, Any]:
    out = {k: v for k, v in meta.items() if k not in DROPPED_METADATA}
    for key in ("labels", "annotations"):
        kept = _without_incidental(out.pop(key, None))
        # Metacontroller's generateSelector labels every child with its parent's uid.
        if key == "labels" and job_uid and kept.get(CONTROLLER_UID) == job_uid:
            del kept[CONTROLLER_UID]
        if kept:
            out[key] = kept
    if "ownerReferences" in out:
        out["ownerReferences"] = [
            {k: v for k, v in ref.items() if k != "uid"} for ref in out["ownerReferences"]
        ]
    if "deletionTimestamp" in out:
        out["deletionTimestamp"] = SET
    return out


def _token_volume_name(name: str) -> str:
    return "kube-api-access-<random>" if TOKEN_VOLUME.match(name) else name


def pod(obj: dict[str, Any], job_uid: str | None = None) -> dict[str, Any]:
    spec = dict(obj.get("spec") or {})
    spec["volumes"] = [{**v, "name": _token_volume_name(v["name"])} for v in spec.get("volumes") or []]
    for key in ("containers", "initContainers"):
        if key in spec:
            spec[key] = [
                {
                    **c,
                    "volumeMounts": [{**m, "name": _token_volume_name(m["name"])} for m in c["volumeMounts"]],
                }
                if c.get("volumeMounts")
                else c
                for c in spec[key]
            ]
    if not spec["volumes"]:
        del spec["volumes"]
    return {
        "metadata": metadata(obj["metadata"], job_uid),
        "spec": spec,
        "phase": (obj.get("status") or {}).get("phase"),
    }


def service(obj: dict[str, Any], job_uid: str | None = None) -> dict[str, Any]:
    spec = dict(obj.get("spec") or {})
    for key in ("clusterIP", "clusterIPs"):
        value = spec.get(key)
        if value is not None and value not in ("None", ["None"]):
            spec[key] = "<allocated>"
    return {"metadata": metadata(obj["metadata"], job_uid), "spec": spec}


def generic(obj: dict[str, Any], job_uid: str | None = None) -> dict[str, Any]:
    dropped = {"apiVersion", "kind", "metadata", "status"}
    return {
        "metadata": metadata(obj["metadata"], job_uid),
        **{k: v for k, v in obj.items() if k not in dropped},
    }


NORMALIZERS = {"Pod": pod, "Service": service}


def job_status(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    if obj is None:
        return None
    status = dict(obj.get("status") or {})
    out: dict[str, Any] = {}
    conditions = status.pop("conditions", None)
    if conditions is not None:
        out["conditions"] = [
            {k: c[k] for k in ("type", "status", "reason", "message") if k in c} for c in conditions
        ]
    for key in TIMES:
        if key in status:
            status.pop(key)
            out[key] = SET
    status.pop("observedGeneration", None)
    out.update(status)
    return out


def event(ev: dict[str, Any]) -> str:
    """One Event as a user reads it in ``kubectl describe``: type, reason and message."""
    return f"{ev.get('type')} {ev.get('reason')}: {ev.get('message')}"


def snapshot(raw: dict[str, Any], job_kind: str, job_name: str) -> dict[str, Any]:
    """The comparable state of one job's namespace from ``runner.fetch``'s raw lists."""
    children: dict[str, Any] = {}
    job_uid = ((raw.get("job") or {}).get("metadata") or {}).get("uid")
    for kind in CHILD_KINDS:
        for obj in raw.get(kind) or []:
            name = obj["metadata"]["name"]
            if (kind, name) in NAMESPACE_DEFAULTS:
                continue
            children[f"{kind}/{name}"] = NORMALIZERS.get(kind, generic)(obj, job_uid)

    def source(ev: dict[str, Any]) -> str:
        return str((ev.get("source") or {}).get("component") or ev.get("reportingComponent"))

    def about_job(ev: dict[str, Any]) -> bool:
        obj = ev.get("involvedObject") or {}
        return obj.get("kind") == job_kind and obj.get("name") == job_name

    events = raw.get("Event") or []
    on_job = [ev for ev in events if about_job(ev)]
    # An operator's Events about anything else (a pod, a service) count too; the cluster's own
    # components (scheduler, controller manager, kwok) report the same pod stages on both sides.
    elsewhere = [ev for ev in events if not about_job(ev) and source(ev) in OPERATOR_SOURCES]
    return {
        # Not compared (diff skips "_" keys): how many Events the job's recorder got through, which
        # tells whether client-go's per-object spam filter (burst 25) may have dropped later ones.
        "_eventEmissions": sum(int(ev.get("count") or 1) for ev in on_job),
        "job": {"exists": raw.get("job") is not None, "status": job_status(raw.get("job"))},
        "children": children,
        "events": sorted({event(ev) for ev in on_job}),
        "eventSources": sorted({source(ev) for ev in on_job}),
        "otherEvents": sorted({f"{_object(ev)} {event(ev)} ({source(ev)})" for ev in elsewhere}),
    }


def _object(ev: dict[str, Any]) -> str:
    obj = ev.get("involvedObject") or {}
    return f"{obj.get('kind')}/{obj.get('name')}"
