"""The Helm chart as a user installs it, on the e2e control plane.

``packaged_chart`` copies ``charts/trainop`` and puts the Metacontroller chart into its ``charts/``
folder: ``hack/build-control-plane.sh`` packages it from the Metacontroller source with ``helm package``,
which is the archive ``helm dependency build`` would fetch from the OCI registry.

``Release`` drives ``helm install/upgrade/uninstall`` with the cluster's admin kubeconfig and then runs the
release's servers the only way a kwok cluster allows (its pods get no routable IPs): outside the
cluster on loopback, reached through the chart's ``development.*URL`` values, each with the credentials
of the ServiceAccount the chart gives it (``kubectl create token``) and the command, arguments and
environment of the chart's own workload object read back from the apiserver. So the RBAC, the
Metacontroller flags and the server settings under test are the ones the chart installed.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane, ControlPlaneError, ManagedProcess, default_cache_dir, free_ports
from images import (
    Container,
    deployment_pod_specs,
    ensure_image,
    holds_token,
    pod_containers,
    run_pod,
    shared_volumes,
)

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "trainop"
METACONTROLLER_CHART = "metacontroller-helm-4.17.2.tgz"


def packaged_chart(dest: Path) -> Path:
    """charts/trainop with its Metacontroller dependency in charts/, as after `helm dependency build`."""
    archive = default_cache_dir() / "charts" / METACONTROLLER_CHART
    if not archive.is_file():
        raise ControlPlaneError(f"{archive} is missing: run hack/build-control-plane.sh (it packages it)")
    chart = dest / "trainop"
    shutil.copytree(CHART, chart, ignore=shutil.ignore_patterns("*.tgz"))
    (chart / "charts").mkdir(exist_ok=True)
    shutil.copy2(archive, chart / "charts" / METACONTROLLER_CHART)
    return chart


@dataclass(frozen=True)
class ObjectRef:
    kind: str
    name: str
    namespace: str | None

    def ref(self) -> list[str]:
        args = [f"{self.kind}/{self.name}"]
        return [*args, "-n", self.namespace] if self.namespace else args


class Release:
    """One Helm release of the chart on ``cp``; see the module docstring."""

    def __init__(self, cp: ControlPlane, chart: Path, name: str, namespace: str) -> None:
        self.cp = cp
        self.chart = chart
        self.name = name
        self.namespace = namespace
        self.helm_bin = cp.bin_dir / "helm"
        self.hooks_port, self.webhooks_port = free_ports(2)
        self.servers: list[ManagedProcess] = []
        self.containers: dict[str, Container] = {}

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl(*args, **kw)

    # ------------------------------------------------------------------ helm
    def helm(
        self, *args: str, check: bool = True, timeout: float = 300.0
    ) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [str(self.helm_bin), "--kubeconfig", str(self.cp.kubeconfig), *args],
            capture_output=True,
            text=True,
            env=self.cp.env,
            timeout=timeout,
        )
        if check and res.returncode != 0:
            raise ControlPlaneError(
                f"helm {' '.join(args)} exited {res.returncode}:\n{res.stderr}{res.stdout}"
            )
        return res

    @property
    def development_urls(self) -> list[str]:
        return [
            f"development.hooksURL=http://127.0.0.1:{self.hooks_port}",
            f"development.webhooksURL=https://127.0.0.1:{self.webhooks_port}",
        ]

    def install(self, settings: Sequence[str] = (), *, wait: bool = True) -> None:
        args = ["install", self.name, str(self.chart), "-n", self.namespace, "--create-namespace"]
        self.helm(*args, *self._set([*self.development_urls, *settings]), *self._wait(wait))

    def upgrade(self, settings: Sequence[str] = (), *, wait: bool = True) -> None:
        args = ["upgrade", self.name, str(self.chart), "-n", self.namespace]
        self.helm(*args, *self._set([*self.development_urls, *settings]), *self._wait(wait))

    def uninstall(self) -> None:
        self.helm("uninstall", self.name, "-n", self.namespace, "--wait", "--timeout=120s")

    @staticmethod
    def _set(settings: Sequence[str]) -> list[str]:
        return [a for s in settings for a in ("--set", s)]

    @staticmethod
    def _wait(wait: bool) -> list[str]:
        return ["--wait", "--timeout=180s"] if wait else []

    def manifest_objects(self) -> list[ObjectRef]:
        """Every object of the release's current manifest (CRDs of crds/ are not part of it)."""
        text = self.helm("get", "manifest", self.name, "-n", self.namespace).stdout
        # A namespaced object without a namespace lands in the release's; kubectl ignores -n for the rest.
        return [
            ObjectRef(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace") or self.namespace)
            for d in yaml.safe_load_all(text)
            if d
        ]

    def values(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(
            self.helm("get", "values", self.name, "-n", self.namespace, "--all", "-o", "json").stdout
        )
        return out

    # ------------------------------------------------------------------ what the chart installed
    def workload(self, kind: str, name: str) -> dict[str, Any]:
        return dict(self.cp.get_json(f"{kind}/{name}", "-n", self.namespace))

    def container(self, kind: str, name: str) -> dict[str, Any]:
        spec = self.workload(kind, name)["spec"]["template"]["spec"]
        return dict(spec["containers"][0])

    def service_account(self, kind: str, name: str) -> str:
        return str(self.workload(kind, name)["spec"]["template"]["spec"]["serviceAccountName"])

    def token_kubeconfig(self, service_account: str) -> Path:
        """A kubeconfig that authenticates as the release's ``service_account`` (a bound token)."""
        token = self.cp.kubectl(
            "create", "token", service_account, "-n", self.namespace, "--duration=2h"
        ).stdout.strip()
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "sa",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {
                        "server": self.cp.server,
                        # Inline: the file is also read inside containers, where host paths do not exist.
                        "certificate-authority-data": base64.b64encode(
                            (self.cp.pki / "ca.crt").read_bytes()
                        ).decode(),
                    },
                }
            ],
            "users": [{"name": service_account, "user": {"token": token}}],
            "contexts": [
                {
                    "name": "sa",
                    "context": {"cluster": "e2e", "user": service_account, "namespace": self.namespace},
                }
            ],
        }
        path = self.cp.work_dir / f"{self.name}-{service_account}.kubeconfig"
        path.write_text(json.dumps(cfg, indent=1))
        path.chmod(0o644)  # read by the non-root user of the image
        return path

    # ------------------------------------------------------------------ Metacontroller of the release
    def metacontroller_statefulset(self) -> str:
        names = self.cp.kubectl(
            "get", "statefulsets", "-n", self.namespace, "-l", f"app.kubernetes.io/instance={self.name}",
            "-o", "jsonpath={.items[*].metadata.name}",
        ).stdout.split()  # fmt: skip
        found = [n for n in names if "metacontroller" in n]
        if len(found) != 1:
            raise ControlPlaneError(f"expected one Metacontroller StatefulSet in the release, found {names}")
        return found[0]

    def start_metacontroller(self) -> ManagedProcess:
        """The real binary with the release's ServiceAccount and the StatefulSet's own arguments.

        Only the listen addresses move to free loopback ports; every other flag is the chart's.
        """
        sts = self.metacontroller_statefulset()
        container = self.container("statefulset", sts)
        kubeconfig = self.token_kubeconfig(self.service_account("statefulset", sts))
        health, metrics = free_ports(2)
        local = {
            "--health-probe-bind-address": f"127.0.0.1:{health}",
            "--metrics-address": f"127.0.0.1:{metrics}",
        }
        flags = {a.split("=", 1)[0]: a for a in container.get("args") or []}
        flags.update({k: f"{k}={v}" for k, v in local.items()})
        proc = self.cp.start_process(
            f"{self.name}-metacontroller",
            [str(self.cp.bin_dir / "metacontroller"), *flags.values()],
            env={"KUBECONFIG": str(kubeconfig)},
        )
        self.servers.append(proc)
        self.cp.wait_http(
            "release Metacontroller /readyz", f"http://127.0.0.1:{health}/readyz", None, 60, watch=[proc]
        )
        return proc

    # ------------------------------------------------------------------ hook and webhook servers
    def start_servers(self) -> None:
        """The release's webhooks and hooks from the project's image, then its Metacontroller.

        Each container is the chart's Deployment pod (command, env, uid, read-only root filesystem, tmpfs
        /tmp, capabilities, limits) with only its listen addresses moved to loopback ports and a kubeconfig
        carrying its ServiceAccount's token in place of the token the kubelet would mount.
        """
        docs = [
            d
            for d in yaml.safe_load_all(self.helm("get", "manifest", self.name, "-n", self.namespace).stdout)
            if d
        ]
        pods = deployment_pod_specs(docs)
        config_maps = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
        image = ensure_image()
        webhooks_metrics, hooks_metrics = free_ports(2)
        binds = {
            "webhooks": {
                "TRAINOP_WEBHOOK_BIND": f"127.0.0.1:{self.webhooks_port}",
                "TRAINOP_WEBHOOK_METRICS_BIND": f"127.0.0.1:{webhooks_metrics}",
            },
            "hooks": {
                "TRAINOP_HOOK_BIND": f"127.0.0.1:{self.hooks_port}",
                "TRAINOP_HOOK_METRICS_BIND": f"127.0.0.1:{hooks_metrics}",
            },
        }
        for component in ("webhooks", "hooks"):
            pod = pods[component]
            kubeconfig = self.token_kubeconfig(str(pod["serviceAccountName"]))
            shared = {name: self._shared_dir(component, name) for name in shared_volumes(pod)}
            for one in pod_containers(pod):
                [spec] = one["containers"]
                # Only a container the kubelet would give the token gets the kubeconfig standing in for it.
                token = holds_token(pod, spec)
                container = run_pod(
                    image,
                    one,
                    name=f"e2e-{self.name}-{component}-{spec['name']}",
                    env={
                        **binds[component],
                        **({"TRAINOP_KUBECONFIG": "/etc/trainop/kubeconfig"} if token else {}),
                    },
                    files={"/etc/trainop/kubeconfig": kubeconfig} if token else {},
                    shared=shared,
                    config_maps=config_maps,
                )
                main = spec["name"] == pod["containers"][0]["name"]
                self.containers[component if main else f"{component}/{spec['name']}"] = container
                if spec.get("restartPolicy") == "Always":  # a sidecar: the kubelet waits for its start
                    container.wait_started(timeout=90)
            port = self.webhooks_port if component == "webhooks" else self.hooks_port
            self.containers[component].wait_ready(port, timeout=90)
        self.start_metacontroller()

    def _shared_dir(self, component: str, volume: str) -> Path:
        """A host directory for an emptyDir two containers of the pod mount (world-writable, as tmpfs)."""
        path = self.cp.work_dir / f"{self.name}-{component}-{volume}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        path.chmod(0o1777)
        return path

    def servers_log(self, component: str) -> str:
        """The whole log of the release's server ``component`` (hooks, webhooks, metacontroller, or a
        sidecar as ``webhooks/cert-rotator``)."""
        if component in self.containers:
            return self.containers[component].logs()
        for proc in reversed(self.cp.started):
            if proc.name == f"{self.name}-{component}":
                return proc.log_path.read_text(errors="replace")
        raise KeyError(component)

    def stop_servers(self) -> None:
        while self.servers:
            self.cp.stop_process(self.servers.pop())
        while self.containers:
            self.containers.popitem()[1].stop()
