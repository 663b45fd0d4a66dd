"""MPIJob (v1): a launcher that execs into sleeping workers through kubectl, its hostfile and RBAC."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from types import MappingProxyType

from pydantic import Field

from trainop.api import constants as c
from trainop.api import devices
from trainop.api.checks import Result, check_enum
from trainop.api.kinds import ChildType, KindInfo
from trainop.api.models import Model, ReplicaSpecs, RunPolicy, optional
from trainop.frameworks.base import Framework, env
from trainop.job.context import JobContext
from trainop.job.event import NORMAL, WARNING, Event
from trainop.job.mounts import Mounted
from trainop.job.observed import Children, ObservedPod, objects
from trainop.jsontypes import Json

MPIJOB = KindInfo(
    kind="MPIJob",
    plural="mpijobs",
    singular="mpijob",
    replica_field="mpiReplicaSpecs",
    replica_types=("Launcher", "Worker"),
    default_container="mpi",
    port_name="mpi-port",
    port=9999,
    add_default_port=False,
    default_restart_policy="Never",
    controller_name="mpijob-controller",
    framework="mpi",
    master_types=("Launcher",),
    worker0_is_master_fallback=False,
    worker_type="Worker",
    required_types=("Launcher",),
    single_replica_types=("Launcher",),
    default_replicas=MappingProxyType({"Launcher": 1, "Worker": 0}),
    unindexed_types=("Launcher",),
    extra_child_suffixes=("config", "launcher"),
    # The hostfile ConfigMap and the Role's rules follow the job; a RoleBinding's roleRef is immutable
    # and a ServiceAccount carries nothing we change.
    extra_children=(
        ChildType("v1", "configmaps", "InPlace"),
        ChildType("v1", "serviceaccounts", "OnDelete"),
        ChildType("rbac.authorization.k8s.io/v1", "roles", "InPlace"),
        ChildType("rbac.authorization.k8s.io/v1", "rolebindings", "OnDelete"),
    ),
)


CONFIG_VOLUME = "mpi-job-config"
KUBECTL_VOLUME = "mpi-job-kubectl"
CONFIG_DIR = "/etc/mpi"
KUBECTL_DIR = "/opt/kube"
SERVICE_ACCOUNT = "ServiceAccount.v1"
ROLE = "Role.rbac.authorization.k8s.io/v1"
ROLE_BINDING = "RoleBinding.rbac.authorization.k8s.io/v1"
# Kubeflow's MPI controller announces, on every reconcile, the launcher RBAC objects it found.
EXISTING_RBAC = (
    (SERVICE_ACCOUNT, "ServiceAccount is exist", "ServiceAccount"),
    (ROLE, "LauncherRole is exist", "LauncherRole"),
    (ROLE_BINDING, "RoleBinding is exist", "RoleBinding"),
)


class MPIJobSpec(Model):
    slots_per_worker: int | None = optional("Slots per worker in the hostfile (default 1).", "slotsPerWorker")
    clean_pod_policy: str | None = optional("Legacy copy of runPolicy.cleanPodPolicy.", "cleanPodPolicy")
    mpi_replica_specs: ReplicaSpecs = Field(description="Launcher and Worker.", alias="mpiReplicaSpecs")
    main_container: str | None = optional("Container kubexec.sh execs into.", "mainContainer")
    run_policy: RunPolicy | None = optional("Run policy of the job.", "runPolicy")


def _merge_slots(hosts: Sequence[str], slots: int) -> list[tuple[str, int]]:
    """One line per host with its slots added up: Open MPI rejects a host listed twice, which is what
    every replica on 127.0.0.1 would give locally (on a cluster each host is distinct anyway)."""
    merged: dict[str, int] = {}
    for host in hosts:
        merged[host] = merged.get(host, 0) + slots
    return list(merged.items())


# What the apiserver accepts as a container name.
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
CONTAINER_NAME_MAX = 63


def _is_container_name(name: str) -> bool:
    return len(name) <= CONTAINER_NAME_MAX and DNS1123_LABEL.fullmatch(name) is not None


def config_name(job_name: str) -> str:
    """The job's ConfigMap child: kubexec.sh, hostfile and discover_hosts.sh."""
    return f"{job_name}-config"


_HOSTFILE_LINE = re.compile(r"(?P<host>[^\s]+) slots=[1-9][0-9]*")
_DISCOVER_LINE = re.compile(r"echo (?P<host>[^\s:]+):[1-9][0-9]*")


def _lines_name_hosts(text: str, line: re.Pattern[str], hosts: set[str]) -> bool:
    """Whether every non-empty line of `text` matches `line` and names one of `hosts`."""
    for raw in text.split("\n"):
        m = line.fullmatch(raw)
        if raw and (m is None or m.group("host") not in hosts):
            return False
    return True


def _controlled_by(pod: ObservedPod, uid: str) -> bool:
    refs = pod.obj["metadata"].get("ownerReferences") or []
    return bool(uid) and any(r.get("controller") and r.get("uid") == uid for r in refs)


class MPI(Framework):
    info = MPIJOB
    spec_model = MPIJobSpec
    # Kubeflow's MPIJob controller (it has no webhook) works on the first container whatever its name.
    requires_default_container = False
    has_services = False
    recreate_policies = ("ExitCode",)
    # Kubeflow nests NewReason twice here: "MPIJobMPIJobFailed" is what its users and tools see.
    failed_reason = "MPIJobFailed"
    reports_pod_outcomes = False

    # ---- admission --------------------------------------------------------------------------------
    def default_spec(self, spec: Json) -> Json:
        # MPIJob keeps a legacy top-level cleanPodPolicy; runPolicy's wins and both end up equal.
        run_policy = spec["runPolicy"]
        value = run_policy.get("cleanPodPolicy") or spec.get("cleanPodPolicy") or "None"
        return {**spec, "runPolicy": {**run_policy, "cleanPodPolicy": value}, "cleanPodPolicy": value}

    def check_spec(self, spec: Json, result: Result) -> None:
        check_enum(result, "spec.cleanPodPolicy", spec.get("cleanPodPolicy"), c.CLEAN_POD_POLICIES)
        slots = spec.get("slotsPerWorker")
        if isinstance(slots, int) and slots < 1:
            result.error("spec.slotsPerWorker", f"Invalid value: {slots}: must be at least 1")
        main = spec.get("mainContainer")
        # It names a container of the workers, and kubexec.sh pastes it into a shell command line.
        if isinstance(main, str) and main and not _is_container_name(main):
            result.error(
                "spec.mainContainer",
                f"Invalid value: {main!r}: must be a container name (a DNS-1123 label of at most "
                f'{CONTAINER_NAME_MAX} characters: lowercase letters, digits and "-", starting and ending '
                'with a letter or digit, e.g. "mpi"), the name of the workers\' container to exec into',
            )

    # ---- events -----------------------------------------------------------------------------------
    def _launcher(self, ctx: JobContext, pods: Sequence[ObservedPod]) -> ObservedPod | None:
        name = self.launcher_name(ctx)
        return next((p for p in pods if p.name == name), None)

    def active_events(self, ctx: JobContext, children: Children, pods: Sequence[ObservedPod]) -> list[Event]:
        """Kubeflow's MPI ReconcilePods: the RBAC it found, and a launcher running with its workers."""
        launcher = self._launcher(ctx, pods)
        if launcher is not None and launcher.phase in ("Succeeded", "Failed"):
            return []
        out = []
        for key, reason, label in EXISTING_RBAC:
            for obj in objects(children, key):
                meta = obj["metadata"]
                out.append(
                    Event(NORMAL, reason, f"{label}: {meta['name']}", str(meta.get("uid") or meta["name"]))
                )
        workers = [p for p in pods if p.rtype_label == "worker"]
        if (
            launcher is not None
            and launcher.phase == "Running"
            and all(p.phase == "Running" for p in workers)
        ):
            message = f"MPIJob {ctx.namespace}/{ctx.name} is running"
            out.append(Event(NORMAL, "MPIJobRunning", message, launcher.uid, False))
        return out

    def created_pod_event(self, ctx: JobContext, rtype: str | None, name: str, occurrence: str) -> Event:
        if rtype == "Launcher":
            return Event(NORMAL, "MPIJobRunning", f"launcher pod created success: {name}", occurrence)
        return Event(NORMAL, "SuccessfulCreatePod", f"Created worker pod: {name}", occurrence)

    def succeeded_events(self, ctx: JobContext) -> list[Event]:
        # The launcher step records its own message under Kubeflow's plural-prefixed reason.
        message = f"MPIJob {ctx.namespace}/{ctx.name} successfully completed."
        return [Event(NORMAL, "mpijobsSucceeded", message, "succeeded", False)]

    def failed_events(self, ctx: JobContext, pods: Sequence[ObservedPod]) -> list[Event]:
        pod = self._launcher(ctx, pods)
        if pod is None or pod.phase != "Failed":
            return []
        reason = str((pod.obj.get("status") or {}).get("reason") or "MPIJobFailed")
        return [Event(WARNING, reason, f"MPIJob {ctx.namespace}/{ctx.name} has failed", "failed", False)]

    # ---- children and status ----------------------------------------------------------------------

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
            # Kubeflow's rule (a name containing "gpu") widened to every accelerator in the device table:
            # docs/accelerators.md#device-resources.
            if any(devices.is_device(str(k)) for k in limits):
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

    def decorate_pod(self, ctx: JobContext, rtype: str, index: int, pod: Json) -> Json:
        spec = dict(pod["spec"])
        first = dict(spec["containers"][0])
        spec["containers"] = [first, *spec["containers"][1:]]
        config_map = {"name": config_name(ctx.name)}
        if rtype == "Launcher":
            spec.setdefault("serviceAccountName", self.service_account(ctx))
            items = [
                {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555},
                {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
            ]
            spec["volumes"] = [
                *spec.get("volumes", []),
                {"name": KUBECTL_VOLUME, "emptyDir": {}},
                {"name": CONFIG_VOLUME, "configMap": {**config_map, "items": items}},
            ]
            first["volumeMounts"] = [
                *first.get("volumeMounts", []),
                {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_DIR},
                {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR},
            ]
        else:
            if not first.get("command"):
                first["command"] = ["sleep"]
                first["args"] = ["365d"]
            items = [{"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}]
            spec["volumes"] = [
                *spec.get("volumes", []),
                {"name": CONFIG_VOLUME, "configMap": {**config_map, "items": items}},
            ]
            first["volumeMounts"] = [
                *first.get("volumeMounts", []),
                {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR},
            ]
        return {**pod, "spec": spec}

    def waits_for(self, ctx: JobContext, rtype: str, children: Children) -> bool:
        # Metacontroller creates the children of one sync in no useful order (Pod sorts before
        # ServiceAccount), and the apiserver refuses a pod whose ServiceAccount does not exist yet.
        if rtype != "Launcher":
            return False
        account = self.service_account(ctx)
        observed = (children.get(SERVICE_ACCOUNT) or {}).values()
        return not any(o["metadata"]["name"] == account for o in observed)

    def mounted_names(self, job_name: str) -> tuple[str, ...]:
        return (config_name(job_name),)

    def mounts(self, ctx: JobContext) -> tuple[Mounted, ...]:
        """The launcher runs kubexec.sh (mpirun's rsh agent) and discover_hosts.sh from `<job>-config`,
        and the workers mount it too: kubexec.sh must be ours byte for byte; the hostfile and
        discover_hosts.sh follow the workers, so they must only have our form and name the job's hosts."""
        hosts = {ctx.host("Launcher", 0), *(ctx.host("Worker", i) for i in range(ctx.replicas("Worker")))}

        def hostfile(text: str) -> bool:
            return _lines_name_hosts(text, _HOSTFILE_LINE, hosts)

        def discover(text: str) -> bool:
            head, _, rest = text.partition("\n")
            return head == "#!/bin/sh" and _lines_name_hosts(rest, _DISCOVER_LINE, hosts)

        return (
            Mounted(
                config_name(ctx.name),
                exact={"kubexec.sh": self.kubexec(ctx)},
                forms={"hostfile": hostfile, "discover_hosts.sh": discover},
                what="kubexec.sh",
            ),
        )

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
        # Validation admits only container names, which quoting leaves as they are (Kubeflow's bytes);
        # a job that bypassed it still cannot put shell syntax into the script.
        target = f" --container {shlex.quote(str(container))}" if container else ""
        # No trailing newline, as Kubeflow writes it.
        return (
            "#!/bin/sh\n"
            "set -x\n"
            "POD_NAME=$1\n"
            "shift\n"
            f'{KUBECTL_DIR}/kubectl exec ${{POD_NAME}}{target} -- /bin/sh -c "$*"'
        )

    def exec_targets(self, ctx: JobContext, pods: Sequence[ObservedPod]) -> list[str]:
        """The worker pods the launcher may exec into: those that exist and this job controls.

        Kubeflow lists every worker name the job would have, so an MPIJob named like another job's pods
        (an MPIJob `bar` beside a PyTorchJob `bar`, both with a `bar-worker-0`) would get exec rights on
        pods it does not own. Naming only observed pods of ours grants nothing on a collision; a worker
        appears in the Role the sync after it is created, long before the launcher's kubectl-delivery
        has seen it Running and lets mpirun exec into it (docs/design.md#mpi-configmap-and-rbac).
        """
        uid = str(ctx.job["metadata"].get("uid") or "")
        ours = {p.name for p in pods if _controlled_by(p, uid)}
        names = (self.info.pod_name(ctx.name, "Worker", i) for i in range(ctx.replicas("Worker")))
        return [name for name in names if name in ours]

    def extra_children(self, ctx: JobContext, pods: Sequence[ObservedPod], active: bool) -> list[Json]:
        meta = {"namespace": ctx.namespace, "labels": {"app": ctx.name}}
        launcher = self.launcher_name(ctx)
        sa = self.service_account(ctx)
        workers = self.exec_targets(ctx, pods)
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
                "metadata": {"name": config_name(ctx.name), **meta},
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
