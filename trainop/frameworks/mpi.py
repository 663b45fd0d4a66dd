"""MPIJob (v1): a launcher that execs into sleeping workers through kubectl, its hostfile and RBAC."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainop.api.kinds import MPIJOB
from trainop.frameworks.base import Framework, Json, env
from trainop.job.context import JobContext
from trainop.job.observed import ObservedPod

CONFIG_VOLUME = "mpi-job-config"
KUBECTL_VOLUME = "mpi-job-kubectl"
CONFIG_DIR = "/etc/mpi"
KUBECTL_DIR = "/opt/kube"
SERVICE_ACCOUNT = "ServiceAccount.v1"


def _merge_slots(hosts: Sequence[str], slots: int) -> list[tuple[str, int]]:
    """One line per host with its slots added up: Open MPI rejects a host listed twice, which is what
    every replica on 127.0.0.1 would give locally (on a cluster each host is distinct anyway)."""
    merged: dict[str, int] = {}
    for host in hosts:
        merged[host] = merged.get(host, 0) + slots
    return list(merged.items())


def _is_gpu_resource(name: str) -> bool:
    return name.endswith(".com/gpu") or "gpu" in name


class MPI(Framework):
    info = MPIJOB
    has_services = False
    recreate_policies = ("ExitCode",)
    # Kubeflow nests NewReason twice here: "MPIJobMPIJobFailed" is what its users and tools see.
    failed_reason = "MPIJobFailed"

    def settled_statuses(self, ctx: JobContext, statuses: Json, pods: Sequence[ObservedPod]) -> Json:
        # Once the launcher is done Kubeflow stops listing workers and resets their status to {}.
        launcher = self.launcher_name(ctx)
        done = any(p.name == launcher and p.phase in ("Succeeded", "Failed") for p in pods)
        return {**statuses, "Worker": {}} if done and "Worker" in statuses else statuses

    def gpu_launcher(self, ctx: JobContext) -> bool:
        if not ctx.has("Launcher"):
            return False
        for container in ctx.containers("Launcher"):
            limits = (container.get("resources") or {}).get("limits") or {}
            if any(_is_gpu_resource(str(k)) for k in limits):
                return True
        return False

    def launcher_name(self, ctx: JobContext) -> str:
        return self.info.pod_name(ctx.name, "Launcher", 0)

    def service_account(self, ctx: JobContext) -> str:
        template_spec = ctx.replica_specs["Launcher"]["template"]["spec"]
        return str(template_spec.get("serviceAccountName") or self.launcher_name(ctx))

    def slots(self, ctx: JobContext) -> int:
        return int(ctx.spec.get("slotsPerWorker") or 1)

    def exit_code_container(self, ctx: JobContext, rtype: str) -> str:
        # Kubeflow's MPI controller works on the first container, whatever its name.
        return str(ctx.containers(rtype)[0].get("name"))

    def env_container_indexes(self, ctx: JobContext, rtype: str, containers: Sequence[Json]) -> list[int]:
        return [0] if rtype == "Launcher" and containers else []

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        if rtype != "Launcher":
            return []
        out = [
            env("OMPI_MCA_plm_rsh_agent", f"{CONFIG_DIR}/kubexec.sh"),
            env("OMPI_MCA_orte_default_hostfile", f"{CONFIG_DIR}/hostfile"),
        ]
        if not self.gpu_launcher(ctx):
            out += [env("NVIDIA_VISIBLE_DEVICES", ""), env("NVIDIA_DRIVER_CAPABILITIES", "")]
        user_env = {e.get("name") for e in ctx.containers("Launcher")[0].get("env") or []}
        for name, value in (
            ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
            ("I_MPI_HYDRA_BOOTSTRAP_EXEC", f"{CONFIG_DIR}/kubexec.sh"),
        ):
            if name not in user_env:
                out.append(env(name, value))
        return out

    def init_containers(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        if rtype != "Launcher" or not ctx.settings.wait_for_dns:
            return []
        resources = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
        return [
            {
                "name": "kubectl-delivery",
                "image": ctx.settings.mpi_kubectl_delivery_image,
                "imagePullPolicy": "IfNotPresent",
                "env": [env("TARGET_DIR", KUBECTL_DIR), env("NAMESPACE", ctx.namespace)],
                "volumeMounts": [
                    {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_DIR},
                    {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR},
                ],
                "resources": {"limits": dict(resources), "requests": dict(resources)},
            }
        ]

    def decorate_pod(self, ctx: JobContext, rtype: str, index: int, pod: Json) -> None:
        spec = pod["spec"]
        first = spec["containers"][0]
        config_map = {"name": f"{ctx.name}-config"}
        if rtype == "Launcher":
            spec.setdefault("serviceAccountName", self.service_account(ctx))
            items = [
                {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555},
                {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
            ]
            spec.setdefault("volumes", []).extend(
                [
                    {"name": KUBECTL_VOLUME, "emptyDir": {}},
                    {"name": CONFIG_VOLUME, "configMap": {**config_map, "items": items}},
                ]
            )
            first.setdefault("volumeMounts", []).extend(
                [
                    {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_DIR},
                    {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR},
                ]
            )
        else:
            if not first.get("command"):
                first["command"] = ["sleep"]
                first["args"] = ["365d"]
            items = [{"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}]
            spec.setdefault("volumes", []).append(
                {"name": CONFIG_VOLUME, "configMap": {**config_map, "items": items}}
            )
            first.setdefault("volumeMounts", []).append({"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR})

    def waits_for(self, ctx: JobContext, rtype: str, children: Mapping[str, Mapping[str, Json]]) -> bool:
        # Metacontroller creates the children of one sync in no useful order (Pod sorts before
        # ServiceAccount), and the apiserver refuses a pod whose ServiceAccount does not exist yet.
        if rtype != "Launcher":
            return False
        account = self.service_account(ctx)
        observed = (children.get(SERVICE_ACCOUNT) or {}).values()
        return not any(o["metadata"]["name"] == account for o in observed)

    def hostfile(self, ctx: JobContext) -> str:
        slots = self.slots(ctx)
        hosts = [ctx.host("Launcher", 0)] if self.gpu_launcher(ctx) else []
        hosts += [ctx.host("Worker", i) for i in range(ctx.replicas("Worker"))]
        return "".join(f"{host} slots={n}\n" for host, n in _merge_slots(hosts, slots))

    def discover_hosts(self, ctx: JobContext, pods: Sequence[ObservedPod]) -> str:
        slots = self.slots(ctx)
        hosts = [ctx.host("Launcher", 0)] if self.gpu_launcher(ctx) else []
        running = sorted(
            (p for p in pods if p.rtype_label == "worker" and p.phase == "Running" and p.index is not None),
            key=lambda p: p.name,
        )
        hosts += [ctx.host("Worker", p.index or 0) for p in running]
        # Kubeflow's bytes: no trailing newline, and a blank line after a GPU launcher's entry.
        script = "#!/bin/sh"
        for i, (host, n) in enumerate(_merge_slots(hosts, slots)):
            script += f"\necho {host}:{n}" + ("\n" if i == 0 and self.gpu_launcher(ctx) else "")
        return script

    def kubexec(self, ctx: JobContext) -> str:
        container = ctx.spec.get("mainContainer")
        target = f" --container {container}" if container else ""
        # No trailing newline, as Kubeflow writes it.
        return (
            "#!/bin/sh\n"
            "set -x\n"
            "POD_NAME=$1\n"
            "shift\n"
            f'{KUBECTL_DIR}/kubectl exec ${{POD_NAME}}{target} -- /bin/sh -c "$*"'
        )

    def extra_children(self, ctx: JobContext, pods: Sequence[ObservedPod], active: bool) -> list[Json]:
        meta = {"namespace": ctx.namespace, "labels": {"app": ctx.name}}
        launcher = self.launcher_name(ctx)
        sa = self.service_account(ctx)
        workers = [self.info.pod_name(ctx.name, "Worker", i) for i in range(ctx.replicas("Worker"))]
        role_rules: list[Json] = [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
        ]
        if workers:
            role_rules.append(
                {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"], "resourceNames": workers}
            )
        return [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, **meta}},
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{ctx.name}-config", **meta},
                "data": {
                    "hostfile": self.hostfile(ctx),
                    "kubexec.sh": self.kubexec(ctx),
                    "discover_hosts.sh": self.discover_hosts(ctx, pods),
                },
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": launcher, **meta},
                "rules": role_rules,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": launcher, **meta},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ctx.namespace}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": launcher},
            },
        ]
