"""The project's container image in tests: build it, and run the chart's servers from it with podman.

``hack/build-image.sh`` builds the Dockerfile unchanged (buildah, a python:3.11-slim made from Debian
packages; docs/build.md#image) into its own podman storage under ``$TRAINOP_IMAGE_CACHE``
(default ``~/.cache/trainop-image``); this module runs podman with that storage and configuration.

A server runs as the chart's Deployment configures it: pass the Deployment's pod spec (from
``helm template`` / ``helm get manifest``, see :func:`deployment_pod_specs`) and :func:`run_pod` turns it
into ``podman run``: the container's command, args and env; ``runAsUser``/``runAsGroup``
(``--user``), ``readOnlyRootFilesystem`` (``--read-only``, and no writable /tmp, /run unless a volume
provides it), dropped/added capabilities, ``allowPrivilegeEscalation: false``
(``--security-opt no-new-privileges``), memory/CPU limits; ``emptyDir`` volumes become tmpfs mounts of
their ``sizeLimit`` and ``secret`` volumes read-only directories of files you supply (mode 0644 as the
kubelet's default ``defaultMode``, so uid 65532 can read them). The network is the host's: choose a
loopback port through the app's bind variable (``TRAINOP_HOOK_BIND``, ``TRAINOP_WEBHOOK_BIND``).
A ServiceAccount token is not mounted (``automountServiceAccountToken`` and projected
``serviceAccountToken`` volumes are left out; :func:`holds_token` says which container would have one):
give a container that calls the API (the hooks; the webhooks' cert-rotator sidecar, the chart's default)
a kubeconfig instead, with its credentials inline (``*-data`` fields or a token, e.g. from
``kubectl create token <the chart's ServiceAccount>``; host paths do not exist in the container)::

    run_pod(image, pods["hooks"], name="e2e-hooks", files={"/etc/trainop/kubeconfig": kubeconfig_path},
            env={"TRAINOP_HOOK_BIND": "127.0.0.1:18080", "TRAINOP_HOOK_METRICS_BIND": "127.0.0.1:18081",
                 "TRAINOP_KUBECONFIG": "/etc/trainop/kubeconfig"})

Bind every port of the app to a free loopback port, its metrics port too (``TRAINOP_*_METRICS_BIND``):
on the host network the defaults (0.0.0.0:8081/8082) would collide with other servers. Typical use::

    image = ensure_image()
    pods = deployment_pod_specs(manifests)       # {"hooks": {...}, "webhooks": {...}}
    with run_pod(image, pods["webhooks"], name="e2e-webhooks",
                 env={"TRAINOP_WEBHOOK_BIND": "127.0.0.1:19443"},
                 secrets={"tls": {"tls.crt": cert_path, "tls.key": key_path}}) as server:
        server.wait_ready(19443)                 # the Deployment's readinessProbe, on that port
        ...                                      # server.alive(), server.logs(), server.exec("id", "-u")
    # leaving the block (or server.stop()) removes the container

A pod of several containers (the webhooks' cert-rotator sidecar beside the server) runs as one podman
container each: :func:`pod_containers` splits the pod spec, native sidecars (init containers with
``restartPolicy: Always``) first, and an ``emptyDir`` that more than one of them mounts
(:func:`shared_volumes`) becomes one host directory passed to each as ``shared``; start each sidecar and
``wait_started()`` it (its ``startupProbe`` exec, as the kubelet holds the main container back) before
the next.

For a container runtime elsewhere (containerd on a real node, kind), :func:`save_image` writes the image
as a docker-archive.
"""

from __future__ import annotations

import functools
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-image.sh"
COMPONENT_LABEL = "app.kubernetes.io/component"
# What a file of a Secret volume gets when the volume sets no defaultMode (the kubelet's 0644).
SECRET_DEFAULT_MODE = 0o644

FileSource = bytes | str | Path


class ImageError(RuntimeError):
    """The image could not be built, or a container could not be started as asked."""


def image_cache_dir() -> Path:
    """Where ``hack/build-image.sh`` keeps podman's storage and configuration."""
    return Path(os.environ.get("TRAINOP_IMAGE_CACHE", str(Path.home() / ".cache" / "trainop-image")))


def podman_env() -> dict[str, str]:
    """The environment for podman: our own engine and storage configuration, not the machine's."""
    cache = image_cache_dir()
    return {
        **os.environ,
        "CONTAINERS_CONF": str(cache / "containers.conf"),
        "CONTAINERS_STORAGE_CONF": str(cache / "storage.conf"),
    }


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs podman with :func:`podman_env`; raises ImageError with its output when it fails and check."""
    done = subprocess.run(
        ["podman", *args], env=podman_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise ImageError(f"podman {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


@functools.cache
def ensure_image() -> str:
    """Builds (or reuses) the image of this work tree; returns its content-addressed reference.

    The reference is ``docker.io/library/trainop:src-<hash of the build inputs>``; the same image is
    also tagged ``trainop:<version>`` and ``trainop:dev``.
    """
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1800, check=False
    )
    if done.returncode != 0:
        raise ImageError(f"{BUILD_SCRIPT} exited {done.returncode}:\n{done.stderr[-6000:]}")
    ref = done.stdout.strip()
    if not ref.startswith("docker.io/library/trainop:src-"):
        raise ImageError(f"{BUILD_SCRIPT} printed no image reference: {done.stdout!r}")
    return ref


def save_image(path: Path) -> str:
    """Builds (or reuses) the image and writes it to ``path`` as a docker-archive (``ctr images import``,
    ``docker load``) tagged ``trainop:<version>``, ``trainop:dev`` and ``trainop:src-<hash>``; returns the
    ``src-`` reference."""
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--save", str(path)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise ImageError(f"{BUILD_SCRIPT} --save {path} exited {done.returncode}:\n{done.stderr[-6000:]}")
    return done.stdout.strip()


def run_command(image: str, argv: Sequence[str], *, user: str = "65532", timeout: float = 60) -> str:
    """Runs one command in a throwaway container (read-only root, tmpfs /tmp, no capabilities); stdout."""
    done = podman(
        "run", "--rm", "--network", "none", "--user", user,
        "--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp:rw,mode=1777",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        "--entrypoint", argv[0], image, *argv[1:],
        timeout=timeout,
    )  # fmt: skip
    return done.stdout


def deployment_pod_specs(manifests: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The pod specs of the rendered chart's Deployments, keyed by their component label."""
    pods: dict[str, dict[str, Any]] = {}
    for obj in manifests:
        if not obj or obj.get("kind") != "Deployment":
            continue
        template = obj["spec"]["template"]
        component = template.get("metadata", {}).get("labels", {}).get(COMPONENT_LABEL)
        if component:
            pods[str(component)] = dict(template["spec"])
    return pods


def pod_containers(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pod's native sidecars, then its containers, each as a pod spec of that one container."""
    init = list(pod_spec.get("initContainers") or [])
    if any(c.get("restartPolicy") != "Always" for c in init):
        raise ImageError("only native sidecars (restartPolicy Always) are supported among initContainers")
    bare = {k: v for k, v in pod_spec.items() if k not in ("containers", "initContainers")}
    return [{**bare, "containers": [c]} for c in [*init, *pod_spec.get("containers", [])]]


def shared_volumes(pod_spec: Mapping[str, Any]) -> set[str]:
    """Names of the emptyDir volumes more than one container of the pod mounts."""
    empty = {v["name"] for v in pod_spec.get("volumes") or [] if "emptyDir" in v}
    counts: dict[str, int] = {}
    for ctr in [*(pod_spec.get("initContainers") or []), *pod_spec.get("containers", [])]:
        for name in {m["name"] for m in ctr.get("volumeMounts") or []} & empty:
            counts[name] = counts.get(name, 0) + 1
    return {name for name, n in counts.items() if n > 1}


def holds_token(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    """Whether the kubelet would give `container` a ServiceAccount token: automounted, or a projected
    serviceAccountToken volume it mounts."""
    if pod_spec.get("automountServiceAccountToken", True):
        return True
    mounted = {m["name"] for m in container.get("volumeMounts") or []}
    return any(
        "serviceAccountToken" in source
        for v in pod_spec.get("volumes") or []
        if v["name"] in mounted and "projected" in v
        for source in v["projected"].get("sources") or []
    )


class Container:
    """A running podman container; stop() (or leaving the ``with`` block) removes it."""

    def __init__(self, name: str, pod_spec: Mapping[str, Any], scratch: Path) -> None:
        self.name = name
        self._pod_spec = pod_spec
        self._scratch = scratch

    def alive(self) -> bool:
        done = podman("container", "inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return done.returncode == 0 and done.stdout.strip() == "true"

    def logs(self) -> str:
        done = podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def exec(self, *argv: str) -> str:
        """Runs a command in the container (as its user); returns stdout."""
        return podman("exec", self.name, *argv).stdout

    def wait_started(self, timeout: float = 60) -> None:
        """Runs the container's startupProbe exec command in it until it succeeds."""
        probe = self._pod_spec["containers"][0].get("startupProbe", {}).get("exec")
        if not probe:
            raise ImageError(f"{self.name}: the container has no exec startupProbe")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise ImageError(f"{self.name} exited before it started:\n{self.logs()[-4000:]}")
            if podman("exec", self.name, *probe["command"], check=False).returncode == 0:
                return
            time.sleep(0.5)
        raise ImageError(f"{self.name}: startupProbe still failing after {timeout}s:\n{self.logs()[-4000:]}")

    def wait_ready(self, port: int, timeout: float = 60) -> None:
        """Polls the container's readinessProbe (httpGet path and scheme) on 127.0.0.1:port."""
        probe = self._pod_spec["containers"][0].get("readinessProbe", {}).get("httpGet")
        if not probe:
            raise ImageError(f"{self.name}: the container has no httpGet readinessProbe")
        scheme = str(probe.get("scheme", "HTTP")).lower()
        url = f"{scheme}://127.0.0.1:{port}{probe.get('path', '/')}"
        # The kubelet does not verify a probe's certificate either.
        context = ssl._create_unverified_context() if scheme == "https" else None
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if not self.alive():
                raise ImageError(f"{self.name} exited before it was ready:\n{self.logs()[-4000:]}")
            try:
                with opener.open(url, timeout=2) as response:
                    if 200 <= response.status < 400:
                        return
                    last = f"HTTP {response.status}"
            except (OSError, urllib.error.URLError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise ImageError(f"{self.name} not ready at {url} after {timeout}s ({last}):\n{self.logs()[-4000:]}")

    def stop(self) -> None:
        podman("rm", "--force", "--time", "5", self.name, check=False)
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> Container:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def run_pod(
    image: str,
    pod_spec: Mapping[str, Any],
    *,
    name: str,
    env: Mapping[str, str] | None = None,
    secrets: Mapping[str, Mapping[str, FileSource]] | None = None,
    files: Mapping[str, FileSource] | None = None,
    shared: Mapping[str, Path] | None = None,
    config_maps: Mapping[str, Mapping[str, str]] | None = None,
) -> Container:
    """Starts the pod's single container from ``image`` as the pod spec configures it (module docstring).

    ``env`` adds to / overrides the container's env; ``secrets`` gives the files of each ``secret``
    volume by volume name (file name -> content or host path); ``files`` adds read-only files at
    container paths (e.g. a kubeconfig); ``shared`` maps an ``emptyDir`` volume to a host directory
    other containers of the pod mount too; ``config_maps`` holds the data of the ConfigMaps a
    ``configMap`` volume may name (as the release created them). ``name`` names the container; an old one
    of that name is removed.
    """
    containers = list(pod_spec.get("containers", []))
    if len(containers) != 1 or pod_spec.get("initContainers"):
        raise ImageError(f"{name}: run_pod runs pods of exactly one container (see pod_containers)")
    container = containers[0]
    scratch = Path(tempfile.mkdtemp(prefix=f"trainop-{name}-"))
    scratch.chmod(0o755)
    try:
        args = [
            "run", "--detach", "--name", name, "--network", "host", "--pull", "never",
            *_security_args(pod_spec.get("securityContext") or {}, container.get("securityContext") or {}),
            *_resource_args(container.get("resources") or {}),
            *_volume_args(pod_spec, container, secrets or {}, shared or {}, config_maps or {}, scratch),
            *_file_args(files or {}, scratch),
            *_env_args(container.get("env") or [], env or {}),
        ]  # fmt: skip
        command = list(container.get("command") or [])
        if command:
            args += ["--entrypoint", command[0], image, *command[1:]]
        else:
            args.append(image)
        args += [str(a) for a in container.get("args") or []]
        podman("rm", "--force", name, check=False)
        podman(*args)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return Container(name, pod_spec, scratch)


def _security_args(pod: Mapping[str, Any], ctr: Mapping[str, Any]) -> list[str]:
    known = {
        "runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile", "readOnlyRootFilesystem",
        "allowPrivilegeEscalation", "capabilities", "privileged",
    }  # fmt: skip
    merged = {**pod, **ctr}  # the container's settings win, as in Kubernetes
    unknown = sorted(set(merged) - known)
    if unknown:
        raise ImageError(f"securityContext fields run_pod does not translate: {unknown}")
    args: list[str] = []
    uid = merged.get("runAsUser")
    if merged.get("runAsNonRoot") and (uid is None or int(uid) == 0):
        raise ImageError("runAsNonRoot needs a non-zero runAsUser here (the image's USER is not checked)")
    if uid is not None:
        gid = merged.get("runAsGroup")
        args += ["--user", f"{uid}:{gid}" if gid is not None else str(uid)]
    profile = (merged.get("seccompProfile") or {}).get("type", "RuntimeDefault")
    if profile != "RuntimeDefault":
        raise ImageError(f"seccompProfile {profile!r}: only RuntimeDefault (podman's default) is supported")
    if merged.get("privileged"):
        args.append("--privileged")
    if merged.get("readOnlyRootFilesystem"):
        # podman would otherwise mount writable tmpfs on /tmp, /var/tmp and /run; the pod has none.
        args += ["--read-only", "--read-only-tmpfs=false"]
    if merged.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    caps = merged.get("capabilities") or {}
    args += [a for cap in caps.get("drop") or [] for a in ("--cap-drop", str(cap))]
    args += [a for cap in caps.get("add") or [] for a in ("--cap-add", str(cap))]
    return args


def _resource_args(resources: Mapping[str, Any]) -> list[str]:
    limits = resources.get("limits") or {}
    args: list[str] = []
    if "memory" in limits:
        args += ["--memory", f"{_quantity_bytes(str(limits['memory']))}b"]
    if "cpu" in limits:
        cpu = str(limits["cpu"])
        args += ["--cpus", str(int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu))]
    return args


_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DECIMAL_SUFFIXES = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def _quantity_bytes(quantity: str) -> int:
    for suffix, factor in (*_BINARY_SUFFIXES.items(), *_DECIMAL_SUFFIXES.items()):
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * factor)
    try:
        return int(quantity)
    except ValueError:
        raise ImageError(f"unsupported quantity {quantity!r}") from None


def _volume_args(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    secrets: Mapping[str, Mapping[str, FileSource]],
    shared: Mapping[str, Path],
    config_maps: Mapping[str, Mapping[str, str]],
    scratch: Path,
) -> list[str]:
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    args: list[str] = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"])
        if volume is None:
            raise ImageError(f"volumeMount {mount['name']!r} names no volume of the pod")
        path = str(mount["mountPath"])
        if "emptyDir" in volume and mount["name"] in shared:
            options = "ro" if mount.get("readOnly") else "rw"
            args += ["--volume", f"{shared[mount['name']]}:{path}:{options}"]
        elif "emptyDir" in volume:
            size = (volume["emptyDir"] or {}).get("sizeLimit")
            options = "rw,mode=1777" + (f",size={_quantity_bytes(str(size))}" if size else "")
            args += ["--tmpfs", f"{path}:{options}"]
        elif "secret" in volume:
            if mount["name"] not in secrets:
                raise ImageError(f"secret volume {mount['name']!r} needs its files: secrets={{...}}")
            mode = int((volume["secret"] or {}).get("defaultMode", SECRET_DEFAULT_MODE))
            directory = scratch / f"volume-{mount['name']}"
            directory.mkdir(mode=0o755)
            for file_name, source in secrets[mount["name"]].items():
                _materialize(directory / file_name, source, mode)
            args += ["--volume", f"{directory}:{path}:ro"]
        elif "configMap" in volume:
            source = volume["configMap"] or {}
            data = config_maps.get(str(source.get("name")))
            if data is None:
                raise ImageError(
                    f"configMap volume {mount['name']!r}: no ConfigMap {source.get('name')!r} given"
                )
            mode = int(source.get("defaultMode", SECRET_DEFAULT_MODE))
            directory = scratch / f"volume-{mount['name']}"
            directory.mkdir(mode=0o755)
            for file_name, content in data.items():
                _materialize(directory / file_name, str(content).encode(), mode)
            args += ["--volume", f"{directory}:{path}:ro"]
        elif any("serviceAccountToken" in src for src in (volume.get("projected") or {}).get("sources", [])):
            continue  # the ServiceAccount token: a kubeconfig stands in (module docstring)
        else:
            raise ImageError(
                f"volume {mount['name']!r}: run_pod supports emptyDir, secret and configMap volumes only"
            )
    return args


def _file_args(files: Mapping[str, FileSource], scratch: Path) -> list[str]:
    args: list[str] = []
    for index, (container_path, source) in enumerate(sorted(files.items())):
        host = scratch / f"file-{index}"
        _materialize(host, source, 0o644)
        args += ["--volume", f"{host}:{container_path}:ro"]
    return args


def _materialize(path: Path, source: FileSource, mode: int) -> None:
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    path.write_bytes(data)
    path.chmod(mode)


def _env_args(container_env: Iterable[Mapping[str, Any]], extra: Mapping[str, str]) -> list[str]:
    values: dict[str, str] = {}
    for entry in container_env:
        if "value" not in entry or "valueFrom" in entry:
            raise ImageError(f"env {entry.get('name')!r}: only plain values are supported, got {entry}")
        values[str(entry["name"])] = str(entry["value"])
    values.update(extra)
    return [a for key, value in values.items() for a in ("--env", f"{key}={value}")]
