"""What each container of a pod runs locally: argv, working directory and environment, resolved like kubelet.

Everything here is a pure function of the desired pod, so the whole job can be checked before a single
process starts, and a pod that cannot run locally fails with the field path that makes it so.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trainop.jsontypes import Json
from trainop.local.errors import NotRunnableLocally
from trainop.local.paths import inside

LOOPBACK = "127.0.0.1"
# Downward-API fields a pod can know about itself without a cluster, as `fieldRef.fieldPath`.
_LABEL_REF = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


@dataclass(frozen=True)
class PodSite:
    """Where a pod runs locally: what its relative paths, mounts and `fieldRef`s resolve against."""

    base_dir: Path
    # volume name -> local directory holding that volume's files (see trainop.local.volumes).
    volumes: Mapping[str, Path] = field(default_factory=dict)
    pod_ip: str = LOOPBACK
    node_name: str = field(default_factory=socket.gethostname)


@dataclass(frozen=True)
class ContainerPlan:
    name: str
    argv: list[str]
    cwd: Path
    # Only the container's own variables; the process gets the run's base environment under them
    # (trainop.local.sandbox).
    env: dict[str, str]


def plan_pod(pod: Json, site: PodSite, path: str) -> tuple[list[ContainerPlan], list[ContainerPlan]]:
    """(init containers, containers) of `pod`; `path` is the pod spec's place in the job, for errors."""
    spec = pod.get("spec") or {}
    init = [
        plan_container(pod, c, site, f"{path}.initContainers[{i}]")
        for i, c in enumerate(spec.get("initContainers") or [])
    ]
    main = [
        plan_container(pod, c, site, f"{path}.containers[{i}]")
        for i, c in enumerate(spec.get("containers") or [])
    ]
    return init, main


def plan_container(pod: Json, container: Json, site: PodSite, path: str) -> ContainerPlan:
    env = resolve_env(pod, container, site, path)
    mounts = _mounts(container, site, path, env)
    env = {k: remap_list(v, mounts) for k, v in env.items()}
    command = [str(x) for x in container.get("command") or []]
    if not command:
        raise NotRunnableLocally(
            f"{path}.command",
            "Required value for local runs: trainop run starts the container's command and cannot use the "
            'image\'s entrypoint; add e.g. command: ["python3", "train.py"]',
        )
    argv = [remap(expand(x, env), mounts) for x in command + [str(a) for a in container.get("args") or []]]
    return ContainerPlan(str(container.get("name")), argv, _cwd(container, site, mounts, path), env)


def resolve_env(pod: Json, container: Json, site: PodSite, path: str) -> dict[str, str]:
    """The container's variables in order, each able to refer to the ones before it, as in Kubernetes."""
    out: dict[str, str] = {}
    for i, source in enumerate(container.get("envFrom") or []):
        kind = next(iter(k for k in source if k.endswith("Ref")), "envFrom")
        raise NotRunnableLocally(f"{path}.envFrom[{i}].{kind}", _cluster_only(kind))
    for i, var in enumerate(container.get("env") or []):
        name = str(var.get("name"))
        if "valueFrom" in var:
            out[name] = _value_from(pod, var["valueFrom"] or {}, site, f"{path}.env[{i}].valueFrom")
        else:
            out[name] = expand(str(var.get("value") or ""), out)
    return out


def _value_from(pod: Json, source: Json, site: PodSite, path: str) -> str:
    if "fieldRef" in source:
        return field_ref(pod, str((source["fieldRef"] or {}).get("fieldPath", "")), site, f"{path}.fieldRef")
    kind = next(iter(source), "valueFrom")
    raise NotRunnableLocally(f"{path}.{kind}", _cluster_only(kind))


def _cluster_only(kind: str) -> str:
    return (
        f"{kind} needs a cluster and trainop run cannot resolve it; "
        "give the variable a plain value for local runs"
    )


def field_ref(pod: Json, field_path: str, site: PodSite, path: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace") or "default",
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": site.node_name,
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": site.pod_ip,
        "status.podIPs": site.pod_ip,
        "status.hostIP": site.pod_ip,
        "status.hostIPs": site.pod_ip,
    }
    if field_path in simple:
        return str(simple[field_path] or "")
    match = _LABEL_REF.match(field_path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise NotRunnableLocally(
        f"{path}.fieldPath",
        f'Unsupported value: "{field_path}": locally a pod knows metadata.name, metadata.namespace, '
        "metadata.uid, metadata.labels['<key>'], metadata.annotations['<key>'], spec.nodeName, "
        "spec.serviceAccountName, status.podIP and status.hostIP",
    )


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: defined names are replaced, `$$` escapes, the rest stays as written."""
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch != "$" or i + 1 == len(value):
            out.append(ch)
            i += 1
            continue
        nxt = value[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = value.find(")", i + 2)
            if end < 0:
                out.append(value[i:])
                break
            name = value[i + 2 : end]
            out.append(env[name] if name in env else value[i : end + 1])
            i = end + 1
        else:
            out.append(ch + nxt)
            i += 2
    return "".join(out)


def _mounts(container: Json, site: PodSite, path: str, env: Mapping[str, str]) -> dict[str, Path]:
    mounts: dict[str, Path] = {}
    for i, mount in enumerate(container.get("volumeMounts") or []):
        volume = site.volumes.get(str(mount.get("name")))
        if volume is None:
            raise NotRunnableLocally(
                f"{path}.volumeMounts[{i}].name",
                f"Not found: no volume named {mount.get('name')!r} in the pod",
            )
        # kubelet expands subPathExpr with the container's variables, then holds it inside the volume.
        expr = bool(mount.get("subPathExpr"))
        sub = expand(str(mount["subPathExpr"]), env) if expr else str(mount.get("subPath") or "")
        field = f"{path}.volumeMounts[{i}].{'subPathExpr' if expr else 'subPath'}"
        mounts[str(mount.get("mountPath", "")).rstrip("/")] = inside(volume, sub, field=field)
    return mounts


def remap(value: str, mounts: Mapping[str, Path]) -> str:
    """A path under a mount point, moved to the local directory that stands for the mount.

    Locally nothing is mounted (that would need root and a mount namespace), so `/etc/mpi/hostfile`
    becomes `<workdir>/volumes/<pod>/mpi-job-config/hostfile`. Only whole path prefixes move.
    """
    for mount_path, local in sorted(mounts.items(), key=lambda m: -len(m[0])):
        if mount_path and (value == mount_path or value.startswith(mount_path + "/")):
            return str(local) + value[len(mount_path) :]
    return value


def remap_list(value: str, mounts: Mapping[str, Path]) -> str:
    """`remap` of each entry of a `:`-separated list (PYTHONPATH, PATH), or of a single path."""
    return ":".join(remap(part, mounts) for part in value.split(":"))


def _cwd(container: Json, site: PodSite, mounts: Mapping[str, Path], path: str) -> Path:
    working_dir = container.get("workingDir")
    if not working_dir:
        # The image's WORKDIR does not exist here; the YAML's folder is where its scripts live.
        return site.base_dir
    cwd = Path(remap(str(working_dir), mounts))
    cwd = cwd if cwd.is_absolute() else site.base_dir / cwd
    if not cwd.is_dir():
        raise NotRunnableLocally(
            f"{path}.workingDir",
            f"{cwd} does not exist on this machine; leave workingDir unset to run in the YAML's folder "
            f"({site.base_dir}) or use a path relative to it",
        )
    return cwd
