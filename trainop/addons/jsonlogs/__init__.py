"""JSON logs from a job's Python processes: the ConfigMap child and what it changes in every pod.

A job asking for them (`trainop.dev/log-format: json`, see `extension`) gets one ConfigMap child holding
`sitecustomize.py` (this package's file, standard library only), mounted read-only into every container
and init container of every pod, its folder first on PYTHONPATH, and the identity each record carries
as environment variables. A job without the annotation is not touched (docs/json-logs.md).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, Final

from trainop.addons.jsonlogs.extension import child_name

Json = dict[str, Any]

VOLUME: Final = "trainop-jsonlogs"
MOUNT_PATH: Final = "/opt/trainop/jsonlogs"
MODULE: Final = "sitecustomize.py"


@cache
def sitecustomize_source() -> str:
    return resources.files(__package__).joinpath(MODULE).read_text(encoding="utf-8")


def config_map(job_name: str, namespace: str, labels: dict[str, str]) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": child_name(job_name), "namespace": namespace, "labels": dict(labels)},
        "data": {MODULE: sitecustomize_source()},
    }


def _field(name: str, path: str) -> Json:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def identity_env(job_name: str, replica_type: str, index: str | None) -> list[Json]:
    """What every record says about where it comes from. Type and index are the pod's label values."""
    out = [
        {"name": "TRAINOP_JOB_NAME", "value": job_name},
        _field("TRAINOP_NAMESPACE", "metadata.namespace"),
        _field("TRAINOP_POD_NAME", "metadata.name"),
        _field("TRAINOP_NODE_NAME", "spec.nodeName"),
        {"name": "TRAINOP_REPLICA_TYPE", "value": replica_type},
    ]
    if index is not None:
        out.append({"name": "TRAINOP_REPLICA_INDEX", "value": index})
    return out


def with_python_path(env: list[Json]) -> list[Json]:
    """`env` with MOUNT_PATH first on the container's own PYTHONPATH, which is kept.

    A plain value is prefixed where it is; one from `valueFrom` is referred to by a later definition
    (`$(PYTHONPATH)`, which kubelet expands from the earlier one)."""
    out = []
    found = False
    for var in env:
        if var.get("name") == "PYTHONPATH" and "valueFrom" not in var:
            value = str(var.get("value") or "")
            var = {**var, "value": f"{MOUNT_PATH}:{value}" if value else MOUNT_PATH}
            found = True
        out.append(var)
    if not found:
        declared = any(v.get("name") == "PYTHONPATH" for v in env)
        out.append({"name": "PYTHONPATH", "value": f"{MOUNT_PATH}:$(PYTHONPATH)" if declared else MOUNT_PATH})
    return out


def decorate_pod(pod: Json, job_name: str, replica_type: str, index: str | None) -> None:
    """Mount the module into every container of `pod` (a desired pod, changed in place)."""
    spec = pod["spec"]
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {"name": VOLUME, "configMap": {"name": child_name(job_name)}},
    ]
    mount = {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    identity = identity_env(job_name, replica_type, index)
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            own = [
                v for v in container.get("env") or [] if v.get("name") not in {e["name"] for e in identity}
            ]
            container["env"] = with_python_path([*own, *identity])
            container["volumeMounts"] = [*(container.get("volumeMounts") or []), dict(mount)]
