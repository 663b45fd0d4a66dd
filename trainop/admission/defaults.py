"""Defaulting of kubeflow.org/v1 jobs, as a pure function on the job's JSON.

The mutating webhook turns the difference into a JSONPatch; the sync hook and `trainop run` apply the
same function in memory, so a job that never passed the webhook behaves identically. The function is
idempotent and tolerant of malformed input: anything of the wrong shape is left for validation to
report instead of being "fixed" here.

It copies only the objects on the paths it changes and shares everything else with its input (a job's
metadata, its pod templates but for the default container's ports), so defaulting costs the same for a
job padded with large fields it never looks at as for a plain one. Callers must treat both as read-only.
"""

from __future__ import annotations

from trainop.api.kinds import KindInfo
from trainop.frameworks import framework
from trainop.jsontypes import Json


def apply_defaults(job: Json) -> Json:
    """Return `job` (any of the seven kinds) defaulted, as a new object sharing what defaulting leaves."""
    fw = framework(str(job.get("kind")))
    info = fw.info
    out = dict(job)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    spec = out["spec"] = dict(spec)
    replicas = spec.get(info.replica_field)
    if isinstance(replicas, dict):
        replicas = spec[info.replica_field] = dict(replicas)
        _normalise_replica_keys(info, replicas)
        for rtype, rspec in replicas.items():
            if isinstance(rspec, dict):
                replicas[rtype] = rspec = dict(rspec)
                _default_replica(info, rtype, rspec)
    run_policy = spec.setdefault("runPolicy", {})
    if isinstance(run_policy, dict):
        spec = out["spec"] = fw.default_spec({**spec, "runPolicy": dict(run_policy)})
        run_policy = spec["runPolicy"]
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
    named = [
        i for i, c in enumerate(containers) if isinstance(c, dict) and c.get("name") == info.default_container
    ]
    index = named[0] if named else 0
    container = containers[index]
    if not isinstance(container, dict):
        return
    ports = container.get("ports", [])
    if not isinstance(ports, list):
        return
    if any(isinstance(p, dict) and p.get("name") == info.port_name for p in ports):
        return
    # Copy the path down to the container (the rest of the template stays shared).
    assert isinstance(template, dict) and isinstance(pod_spec, dict)
    containers = [*containers]
    containers[index] = {**container, "ports": [*ports, {"name": info.port_name, "containerPort": info.port}]}
    rspec["template"] = {**template, "spec": {**pod_spec, "containers": containers}}
