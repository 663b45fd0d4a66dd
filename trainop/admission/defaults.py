"""Defaulting of kubeflow.org/v1 jobs, as a pure function on the job's JSON.

The mutating webhook turns the difference into a JSONPatch; the sync hook and `trainop run` apply the
same function in memory, so a job that never passed the webhook behaves identically. The function is
idempotent and tolerant of malformed input: anything of the wrong shape is left for validation to
report instead of being "fixed" here.
"""

from __future__ import annotations

import copy
from typing import Any

from trainop.api.kinds import KindInfo
from trainop.frameworks import framework

Json = dict[str, Any]


def apply_defaults(job: Json) -> Json:
    """Return a defaulted deep copy of `job` (any of the seven kinds)."""
    fw = framework(str(job.get("kind")))
    info = fw.info
    out = copy.deepcopy(job)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    replicas = spec.get(info.replica_field)
    if isinstance(replicas, dict):
        _normalise_replica_keys(info, replicas)
        for rtype, rspec in replicas.items():
            if isinstance(rspec, dict):
                _default_replica(info, rtype, rspec)
    run_policy = spec.setdefault("runPolicy", {})
    if isinstance(run_policy, dict):
        fw.default_spec(spec, run_policy)
        run_policy.setdefault("cleanPodPolicy", "None")
        run_policy.setdefault("suspend", False)
    return out


def _normalise_replica_keys(info: KindInfo, replicas: Json) -> None:
    for key in list(replicas):
        # Kubeflow normalises only some kinds' keys; validation accepts any case for every kind, so
        # defaulting must spell every key canonically or `launcher` would never be found.
        canonical = info.canonical_type(key)
        # When both spellings exist, leave them for validation to reject as duplicates.
        if canonical and canonical != key and canonical not in replicas:
            replicas[canonical] = replicas.pop(key)


def _default_replica(info: KindInfo, rtype: str, rspec: Json) -> None:
    if rspec.get("replicas") is None:
        rspec["replicas"] = info.replicas_default(rtype)
    if not rspec.get("restartPolicy"):
        rspec["restartPolicy"] = info.default_restart_policy
    if info.add_default_port:
        _add_default_port(info, rspec)


def _add_default_port(info: KindInfo, rspec: Json) -> None:
    template = rspec.get("template")
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    if not isinstance(containers, list) or not containers:
        return
    named = [c for c in containers if isinstance(c, dict) and c.get("name") == info.default_container]
    container = named[0] if named else containers[0]
    if not isinstance(container, dict):
        return
    ports = container.setdefault("ports", [])
    if not isinstance(ports, list):
        return
    if not any(isinstance(p, dict) and p.get("name") == info.port_name for p in ports):
        ports.append({"name": info.port_name, "containerPort": info.port})
