"""A ConfigMap planted under a name the job's pods mount, on the real control plane with the real
Metacontroller: no pod mounts it, the job says why (a Warning Event and its Running condition), and once
it is deleted Metacontroller creates the job's own and the job proceeds (trainop.job.mounts,
docs/security.md#pods-mount-only-what-the-job-owns). Metacontroller's customize hook passes the planted
object in the sync's `related`; every child it creates carries the job's controller reference.
"""

from __future__ import annotations

from typing import Any

from trainop_stack import Namespace, job, kwok_annotations, replica

from trainop.extensions.jsonlogs import sitecustomize_source
from trainop.extensions.jsonlogs.extension import ANNOTATION as LOG_FORMAT

RUN_FOREVER = kwok_annotations(outcome=None, run_for=None)


def plant(ns: Namespace, name: str, data: dict[str, str]) -> None:
    ns.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})


def not_owned_reason(ns: Namespace, ref: str, reason: str) -> dict[str, Any] | None:
    cond = ns.condition(ref, "Running")
    return cond if cond is not None and cond.get("reason") == reason else None


def warnings(ns: Namespace, job_name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in ns.items("events")
        if e["involvedObject"].get("name") == job_name and e.get("reason") == "ConfigMapNotOwned"
    ]


def controller_uid(obj: dict[str, Any]) -> str | None:
    refs = obj["metadata"].get("ownerReferences") or []
    return next((r["uid"] for r in refs if r.get("controller") and r.get("blockOwnerDeletion")), None)


def check_reported_then_proceeds(
    ns: Namespace, ref: str, job_name: str, config_map: str, reason: str, pods: set[str]
) -> None:
    ns.wait_until(f"{ref} reports {config_map}", lambda: not_owned_reason(ns, ref, reason), timeout=60)
    cond = not_owned_reason(ns, ref, reason)
    assert cond is not None and cond["status"] == "False"
    assert cond["message"].startswith(f"delete or rename ConfigMap {ns.name}/{config_map}; it is not owned")
    ns.wait_until("the Warning Event", lambda: bool(warnings(ns, job_name)), timeout=60)
    [event] = warnings(ns, job_name)
    assert event["type"] == "Warning" and event["message"] == cond["message"]
    assert ns.job_children("pods", job_name) == {}
    planted = ns.get(f"configmap/{config_map}")
    assert controller_uid(planted) is None  # Metacontroller never took it over

    ns.kubectl("delete", "configmap", config_map)
    ns.wait_children("pods", job_name, pods, timeout=90)
    uid = ns.get(ref)["metadata"]["uid"]
    own = ns.get(f"configmap/{config_map}")
    assert controller_uid(own) == uid
    ns.wait_until("the report removed", lambda: not_owned_reason(ns, ref, reason) is None, timeout=60)
    # Metacontroller sets the job's controller reference on every child it creates.
    for resource in ("pods", "services", "configmaps", "serviceaccounts", "roles", "rolebindings"):
        for obj in ns.items(resource):
            if obj["metadata"]["name"].startswith(f"{job_name}-"):
                assert controller_uid(obj) == uid, (resource, obj["metadata"]["name"])


def test_a_planted_jsonlogs_configmap_is_never_mounted(namespace: Namespace) -> None:
    ns = namespace
    plant(ns, "logs-jsonlogs", {"sitecustomize.py": "import os\nos.system('id > /tmp/owned')\n"})
    spec = job(
        "PyTorchJob",
        "logs",
        {
            "Master": replica("PyTorchJob", 1, annotations=RUN_FOREVER),
            "Worker": replica("PyTorchJob", 1, annotations=RUN_FOREVER),
        },
    )
    spec["metadata"]["annotations"] = {LOG_FORMAT: "json"}
    ns.create(spec)
    check_reported_then_proceeds(
        ns,
        "pytorchjob/logs",
        "logs",
        "logs-jsonlogs",
        "PyTorchJobConfigMapNotOwned",
        {"logs-master-0", "logs-worker-0"},
    )
    own = ns.get("configmap/logs-jsonlogs")
    assert own["data"] == {"sitecustomize.py": sitecustomize_source()}


def test_a_planted_mpi_config_is_never_mounted(namespace: Namespace) -> None:
    ns = namespace
    plant(ns, "hvd-config", {"kubexec.sh": '#!/bin/sh\nexec /bin/sh -c "$*"\n', "hostfile": ""})
    ns.create(
        job(
            "MPIJob",
            "hvd",
            {
                "Launcher": replica("MPIJob", 1, annotations=RUN_FOREVER),
                "Worker": replica("MPIJob", 2, annotations=RUN_FOREVER),
            },
        )
    )
    check_reported_then_proceeds(
        ns,
        "mpijob/hvd",
        "hvd",
        "hvd-config",
        "MPIJobConfigMapNotOwned",
        {"hvd-launcher", "hvd-worker-0", "hvd-worker-1"},
    )
    assert "kubectl exec" in ns.get("configmap/hvd-config")["data"]["kubexec.sh"]
