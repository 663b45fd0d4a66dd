"""Children as Metacontroller really reports them: what the apiserver stores after the kubelet ran a pod.

A pod read back from a cluster carries far more than the hook asked for: server defaults, the
ServiceAccount token volume, managedFields of Metacontroller and the kubelet, Metacontroller's
last-applied annotation and a full status. The sync hook's cost grows with all of it, so the benchmarks
and the fuzz seeds use these objects rather than bare desired children.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import Any

import orjson

from tests.builders import LAST_APPLIED, container, job, replica
from trainop.controller.sync import sync
from trainop.frameworks import kind_info
from trainop.job.settings import Settings
from trainop.jsontypes import Json

CREATED = "2026-01-01T00:00:00Z"
STARTED = "2026-01-01T00:00:05Z"


def _managed(manager: str, operation: str, fields: Json, subresource: str | None = None) -> Json:
    entry: Json = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": STARTED,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _field_set(obj: Any) -> Any:
    """The shape of managedFields' fieldsV1 for `obj`: every key as `f:<key>`, leaves as {}."""
    if isinstance(obj, dict):
        return {f"f:{k}": _field_set(v) for k, v in obj.items()}
    return {}


def _metadata(desired: Json, index: int, owner: Json) -> Json:
    meta = copy.deepcopy(desired["metadata"])
    annotations = dict(meta.get("annotations") or {})
    annotations[LAST_APPLIED] = json.dumps(desired, separators=(",", ":"))
    owner_meta = owner["metadata"]
    meta.update(
        namespace=owner_meta.get("namespace", "default"),
        uid=f"{index:08x}-7c1d-4e55-9b2a-{index:012x}",
        resourceVersion=str(100_000 + index),
        creationTimestamp=CREATED,
        annotations=annotations,
        ownerReferences=[
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner_meta["name"],
                "uid": owner_meta.get("uid", "uid-job"),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    meta.setdefault("labels", {})["controller-uid"] = owner_meta.get("uid", "uid-job")
    return meta


def pod(desired: Json, index: int, owner: Json, phase: str = "Running", exit_code: int = 0) -> Json:
    """`desired` (a pod the hook returned) as the apiserver holds it once the kubelet reported `phase`."""
    obj = copy.deepcopy(desired)
    obj["metadata"] = _metadata(desired, index, owner)
    spec = obj["spec"]
    token_volume = f"kube-api-access-{index % 100000:05d}"
    for ctr in spec.get("containers", []) + spec.get("initContainers", []):
        ctr.setdefault("imagePullPolicy", "IfNotPresent")
        ctr.setdefault("terminationMessagePath", "/dev/termination-log")
        ctr.setdefault("terminationMessagePolicy", "File")
        ctr.setdefault("resources", {})
        ctr.setdefault("volumeMounts", []).append(
            {
                "name": token_volume,
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        )
    spec.update(
        dnsPolicy="ClusterFirst",
        enableServiceLinks=True,
        nodeName=f"node-{index % 64}",
        preemptionPolicy="PreemptLowerPriority",
        priority=0,
        schedulerName=spec.get("schedulerName", "default-scheduler"),
        securityContext=spec.get("securityContext", {}),
        serviceAccount=spec.get("serviceAccountName", "default"),
        serviceAccountName=spec.get("serviceAccountName", "default"),
        terminationGracePeriodSeconds=30,
        tolerations=[
            {
                "key": f"node.kubernetes.io/{t}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
            for t in ("not-ready", "unreachable")
        ],
    )
    spec.setdefault("volumes", []).append(
        {
            "name": token_volume,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                }
                            ]
                        }
                    },
                ],
            },
        }
    )
    obj["status"] = _pod_status(spec, index, phase, exit_code)
    obj["metadata"]["managedFields"] = [
        _managed(
            "metacontroller", "Update", _field_set({"metadata": desired["metadata"], "spec": desired["spec"]})
        ),
        _managed("kubelet", "Update", _field_set({"status": obj["status"]}), "status"),
    ]
    return obj


def _pod_status(spec: Json, index: int, phase: str, exit_code: int) -> Json:
    ip = f"10.244.{index // 250 % 250}.{index % 250 + 2}"
    host = f"172.18.0.{index % 64 + 2}"
    running = phase == "Running"
    ready = "True" if running else "False"
    statuses = []
    for ctr in spec.get("containers", []):
        if running:
            state: Json = {"running": {"startedAt": STARTED}}
        else:
            state = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Completed" if exit_code == 0 else "Error",
                    "startedAt": STARTED,
                    "finishedAt": "2026-01-01T00:10:00Z",
                    "containerID": f"containerd://{index:064x}",
                }
            }
        statuses.append(
            {
                "name": ctr["name"],
                "state": state,
                "lastState": {},
                "ready": running,
                "restartCount": 0,
                "image": ctr.get("image", ""),
                "imageID": f"{ctr.get('image', '')}@sha256:{'ab' * 32}",
                "containerID": f"containerd://{index:064x}",
                "started": running,
                "volumeMounts": [
                    {
                        "name": m["name"],
                        "mountPath": m["mountPath"],
                        "readOnly": True,
                        "recursiveReadOnly": "Disabled",
                    }
                    for m in ctr.get("volumeMounts", [])
                ],
            }
        )
    conditions = [
        {"type": t, "status": s, "lastProbeTime": None, "lastTransitionTime": STARTED}
        for t, s in (
            ("PodReadyToStartContainers", ready),
            ("Initialized", "True"),
            ("Ready", ready),
            ("ContainersReady", ready),
            ("PodScheduled", "True"),
        )
    ]
    return {
        "phase": phase,
        "conditions": conditions,
        "hostIP": host,
        "hostIPs": [{"ip": host}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": CREATED,
        "containerStatuses": statuses,
        "qosClass": "Burstable",
    }


def service(desired: Json, index: int, owner: Json) -> Json:
    obj = copy.deepcopy(desired)
    obj["metadata"] = _metadata(desired, index, owner)
    spec = obj["spec"]
    for port in spec.get("ports", []):
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    spec.update(
        clusterIPs=["None"],
        internalTrafficPolicy="Cluster",
        ipFamilies=["IPv4"],
        ipFamilyPolicy="SingleStack",
        sessionAffinity="None",
        type="ClusterIP",
    )
    spec.setdefault("clusterIP", "None")
    obj["status"] = {"loadBalancer": {}}
    obj["metadata"]["managedFields"] = [
        _managed(
            "metacontroller", "Update", _field_set({"metadata": desired["metadata"], "spec": desired["spec"]})
        )
    ]
    return obj


def observed(desired: list[Json], owner: Json, phase: str = "Running") -> dict[str, dict[str, Json]]:
    """Metacontroller's `children` for `desired` pods and services once they exist and pods are `phase`."""
    out: dict[str, dict[str, Json]] = {}
    for index, child in enumerate(desired):
        if child["kind"] == "Pod":
            obj = pod(child, index, owner, phase)
        elif child["kind"] == "Service":
            obj = service(child, index, owner)
        else:
            obj = copy.deepcopy(child)
            obj["metadata"] = _metadata(child, index, owner)
        out.setdefault(f"{obj['kind']}.{obj['apiVersion']}", {})[obj["metadata"]["name"]] = obj
    return out


def training_replica(kind: str) -> Json:
    """One replica of a realistic training job of any kind: GPUs, a data volume, env and arguments."""
    main = container(
        kind_info(kind).default_container,
        "registry.example/team/train:2026.01",
        command=["python", "-m", "train"],
        args=["--epochs", "90", "--batch-size", "256"],
        env=[{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "DATA", "value": "/data/imagenet"}],
        resources={"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": "8"}},
        volumeMounts=[{"name": "data", "mountPath": "/data"}],
    )
    spec = replica(kind, 1, [main])
    spec["template"]["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}
    ]
    return spec


def training_job(kind: str, replicas: int) -> Json:
    """`replicas` pods in all: one Master (PyTorch) or Chief (TF), the rest Workers, with GPUs and env."""
    spec = training_replica(kind)
    leader = "Master" if kind == "PyTorchJob" else "Chief"
    types: dict[str, Any] = {leader: spec}
    if replicas > 1:
        types["Worker"] = {**spec, "replicas": replicas - 1}
    out = job(kind, name="bench", namespace="team-a", **types)
    out["metadata"]["uid"] = "6f1c2d7e-0000-4000-8000-000000000001"
    return out


def resync_request(kind: str, replicas: int, now: datetime) -> bytes:
    """Metacontroller's request for a resync of ``training_job`` with every pod Running."""
    parent = training_job(kind, replicas)
    first = sync(parent, {}, Settings(), now)
    running_parent = {**parent, "status": first.status}
    second = sync(running_parent, observed(first.children, parent), Settings(), now)
    body = {"parent": {**parent, "status": second.status}, "children": observed(first.children, parent)}
    return orjson.dumps(body)
