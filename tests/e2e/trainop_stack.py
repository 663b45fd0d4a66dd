"""The whole trainop stack on the e2e control plane, shared by the pytest suite and bench/fanout_bench.py.

``TrainopStack.start()`` brings up, all on random 127.0.0.1 ports in one work dir (one log per process):

1. etcd, kube-apiserver, our CRDs from ``manifests/crds/`` (server-side apply, Established) and the
   CompositeController CRD, then KCM (so its garbage collector knows our kinds from the start), the
   scheduler, kwok and a fake node (``controlplane.ControlPlane``);
2. our admission webhooks under gunicorn over TLS (``pki/webhook.crt``, signed by the run's CA, IP SAN
   127.0.0.1), registered by ``clientConfig.url`` + ``caBundle`` with the rules of
   ``manifests/webhookconfigurations.yaml``; it waits until a dry-run of a known-invalid job is denied
   with our message and a dry-run of a valid one comes back defaulted;
3. our sync hooks under gunicorn on plain HTTP, with ``TRAINOP_KUBECONFIG`` so they can delete jobs whose
   ``ttlSecondsAfterFinished`` expired;
4. the real Metacontroller, run with the chart's flags, and the CompositeControllers of
   ``manifests/compositecontrollers.yaml`` with only the hook URL replaced; it waits until Metacontroller's
   log says each controller started.

Teardown deletes the webhook configurations, then stops every process group in reverse start order.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml
from controlplane import (
    CHART_VALUES,
    CONTROL_PLANE_BINARIES,
    ControlPlane,
    ControlPlaneError,
    ManagedProcess,
    default_bin_dir,
    default_cache_dir,
    free_ports,
    missing_binaries,
    tail,
)

from trainop.install.manifests import podgroup_child

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BUILD_SCRIPT = REPO / "hack" / "build-control-plane.sh"
CRDS_DIR = REPO / "manifests" / "crds"
WEBHOOK_CONFIGS = REPO / "manifests" / "webhookconfigurations.yaml"
COMPOSITE_CONTROLLERS = REPO / "manifests" / "compositecontrollers.yaml"
EXAMPLES = REPO / "trainop" / "examples"
REQUIRED_BINARIES = (*CONTROL_PLANE_BINARIES, "kubectl")

GROUP = "kubeflow.org"
API_VERSION = "kubeflow.org/v1"
# Kubeflow's per-kind constants (docs/design.md#kinds), as the tests see them from outside.
KINDS: dict[str, dict[str, Any]] = {
    "TFJob": {"plural": "tfjobs", "field": "tfReplicaSpecs", "container": "tensorflow",
              "port": ("tfjob-port", 2222), "restart": "Never", "example": "tensorflow"},
    "PyTorchJob": {"plural": "pytorchjobs", "field": "pytorchReplicaSpecs", "container": "pytorch",
                   "port": ("pytorchjob-port", 23456), "restart": "OnFailure", "example": "pytorch"},
    "XGBoostJob": {"plural": "xgboostjobs", "field": "xgbReplicaSpecs", "container": "xgboost",
                   "port": ("xgboostjob-port", 9999), "restart": "Never", "example": "xgboost"},
    "MPIJob": {"plural": "mpijobs", "field": "mpiReplicaSpecs", "container": "mpi",
               "port": None, "restart": "Never", "example": "mpi"},
    "PaddleJob": {"plural": "paddlejobs", "field": "paddleReplicaSpecs", "container": "paddle",
                  "port": ("master", 36543), "restart": "OnFailure", "example": "paddle"},
    "JAXJob": {"plural": "jaxjobs", "field": "jaxReplicaSpecs", "container": "jax",
               "port": ("jaxjob-port", 6666), "restart": "Never", "example": "jax"},
    "MXJob": {"plural": "mxjobs", "field": "mxReplicaSpecs", "container": "mxnet",
              "port": ("mxjob-port", 9091), "restart": "Never", "example": "mxnet"},
}  # fmt: skip
# What a pod's image is never pulled from on kwok; deliberately not a registry address.
IMAGE = "trainop-e2e/noop:1"
# The validating webhook denies this one (XGBoostJob needs a Master): used to see the webhook is live.
PROBE_MESSAGE = "must contain exactly one Master"


def ensure_binaries(bin_dir: Path, log_path: Path) -> None:
    """Build or reuse the binaries; raise ControlPlaneError if one is still missing afterwards.

    The build script is idempotent (<1 s when warm) and rebuilds what its version stamps say is stale,
    so it runs whenever ``bin_dir`` is its output; a ``TRAINOP_E2E_BIN`` elsewhere is used as it is.
    """
    built_here = bin_dir.resolve() == (default_cache_dir() / "bin").resolve()
    why = ""
    if built_here or missing_binaries(bin_dir, REQUIRED_BINARIES):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("wb") as log:
            res = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        why = f"{BUILD_SCRIPT.name} exited {res.returncode}; build log {log_path}:\n{tail(log_path)}"
        if not built_here:
            why = f"{bin_dir} is not the build script's output ({default_cache_dir() / 'bin'}); " + why
    missing = missing_binaries(bin_dir, REQUIRED_BINARIES)
    if missing:
        raise ControlPlaneError(
            f"binaries {missing} are missing from {bin_dir} and could not be built: {why}"
        )


def kwok_annotations(
    outcome: str | None = "Succeeded",
    run_for: str | None = "1s",
    exit_code: int | None = None,
    start_after: str | None = None,
) -> dict[str, str]:
    """Pod annotations read by tests/e2e/kwok-stages.yaml; ``outcome=None`` keeps the pod Running."""
    out: dict[str, str] = {}
    if outcome:
        out["e2e.kwok.io/outcome"] = outcome
    if run_for:
        out["e2e.kwok.io/run-for"] = run_for
    if exit_code is not None:
        out["e2e.kwok.io/exit-code"] = str(exit_code)
    if start_after:
        out["e2e.kwok.io/start-after"] = start_after
    return out


def replica(
    kind: str,
    replicas: int | None = 1,
    restart_policy: str | None = None,
    annotations: dict[str, str] | None = None,
    container: str | None = None,
) -> dict[str, Any]:
    """A replica spec with one container (named like the kind's default container unless given)."""
    out: dict[str, Any] = {
        "template": {
            "metadata": {"annotations": dict(annotations or {})},
            "spec": {"containers": [{"name": container or KINDS[kind]["container"], "image": IMAGE}]},
        }
    }
    if replicas is not None:
        out["replicas"] = replicas
    if restart_policy:
        out["restartPolicy"] = restart_policy
    return out


def job(
    kind: str,
    name: str,
    replica_specs: dict[str, dict[str, Any]],
    run_policy: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {KINDS[kind]["field"]: replica_specs, **spec}
    if run_policy is not None:
        body["runPolicy"] = run_policy
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": body}


def example_job(kind: str, annotations: dict[str, str]) -> dict[str, Any]:
    """The ``kind`` job from ``trainop/examples/<framework>/job.yaml`` with kwok annotations on every replica
    template (kwok fakes the pods, so the script's ConfigMap is not needed).

    Falls back to a builder job (one replica per type) while a kind has no example yet, so that kind is
    still covered; ``metadata.annotations["e2e/source"]`` says which one was used.
    """
    found: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted((EXAMPLES / KINDS[kind]["example"]).glob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == kind and doc.get("apiVersion") == API_VERSION:
                found.append((path, doc))
    if len(found) > 1:
        raise AssertionError(f"several {kind} examples: {[str(p) for p, _ in found]}")
    if found:
        path, obj = found[0]
        source = str(path.relative_to(REPO))
    else:
        types = {"TFJob": ["PS", "Worker"], "MPIJob": ["Launcher", "Worker"], "JAXJob": ["Worker"],
                 "MXJob": ["Scheduler", "Server", "Worker"]}.get(kind, ["Master", "Worker"])  # fmt: skip
        obj = job(kind, f"builder-{kind.lower()}", {t: replica(kind) for t in types})
        source = "builder (no example found)"
    obj.setdefault("metadata", {}).setdefault("annotations", {})["e2e/source"] = source
    for rspec in obj["spec"][KINDS[kind]["field"]].values():
        meta = rspec.setdefault("template", {}).setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    return obj


def webhook_configurations(url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """manifests/webhookconfigurations.yaml, served by ``url`` instead of an in-cluster Service."""
    out = []
    for doc in yaml.safe_load_all(WEBHOOK_CONFIGS.read_text()):
        if not doc:
            continue
        doc["metadata"].pop("annotations", None)  # cert-manager's CA injection has no place here
        doc["metadata"]["name"] = "e2e-" + doc["metadata"]["name"]
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"].get("path", "")
            hook["clientConfig"] = {"url": url + path, "caBundle": ca_bundle}
            hook["failurePolicy"] = "Fail"
        out.append(doc)
    return out


def composite_controllers(hook_base: str, resync_period_seconds: int | None = None) -> list[dict[str, Any]]:
    """manifests/compositecontrollers.yaml with only each hook's URL pointed at ``hook_base``.

    ``resync_period_seconds`` replaces the installed period, for a measurement that must not count
    Metacontroller's periodic resyncs (a load run's "no hook call once everything finished").
    """
    out = []
    for doc in yaml.safe_load_all(COMPOSITE_CONTROLLERS.read_text()):
        if not doc:
            continue
        if resync_period_seconds is not None:
            doc["spec"]["resyncPeriodSeconds"] = resync_period_seconds
        for which, hook in (doc["spec"].get("hooks") or {}).items():
            webhook = hook.get("webhook") or {}
            if "url" in webhook or "service" in webhook:
                path = urlpath(webhook.get("url")) or webhook.get("path") or f"/{which}"
                webhook.pop("service", None)
                webhook.pop("path", None)
                webhook["url"] = hook_base + path
        out.append(doc)
    return out


def urlpath(url: str | None) -> str:
    if not url:
        return ""
    m = re.match(r"^[a-z]+://[^/]+(/.*)?$", url)
    return (m.group(1) or "") if m else ""


class TrainopStack:
    """Control plane + webhooks + hooks + Metacontroller; see the module docstring."""

    def __init__(
        self,
        work_dir: Path,
        bin_dir: Path | None = None,
        *,
        metacontroller_args: Sequence[str] = (),
        hook_workers: int = 2,
        resync_period_seconds: int | None = None,
        gang_scheduler: str = "",
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: Sequence[str] = (),
        server_env: Mapping[str, str] | None = None,
    ) -> None:
        self.cp = ControlPlane(
            bin_dir or default_bin_dir(),
            work_dir,
            feature_gates=feature_gates,
            runtime_config=runtime_config,
        )
        # The hook's TRAINOP_GANG_SCHEDULER; the controllers then list its PodGroup child, as the chart does.
        self.gang_scheduler = gang_scheduler
        # Settings both servers read, as the chart's values give them to both (a cluster default).
        self.server_env = dict(server_env or {})
        self.work_dir = self.cp.work_dir
        self.webhook_port, self.hook_port, self.webhook_metrics_port, self.hook_metrics_port = free_ports(4)
        self.metacontroller_args = list(metacontroller_args)
        self.metacontroller_kubeconfig: Path | None = None
        self.hook_workers = hook_workers
        self.resync_override = resync_period_seconds
        # The registered controllers' resyncPeriodSeconds: every job is synced at least this often.
        self.resync_period_seconds = 0
        self.webhook_configs: list[tuple[str, str]] = []  # (kind, name)
        self.controllers: list[str] = []
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> TrainopStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> TrainopStack:
        cp = self.cp
        t0 = time.monotonic()
        try:
            # Our CRDs and Metacontroller's go in before KCM starts (GC discovery); Metacontroller last.
            cp.start(crds=[CRDS_DIR, cp.metacontroller_crds()])
            self.timings.update(cp.timings)
            webhooks = self.start_webhooks()
            hooks = self.start_hooks()
            self.wait_webhooks_healthy(webhooks)
            self.register_webhooks()
            self.timings["webhooks_effective"] = time.monotonic() - t0
            self.wait_hooks_healthy(hooks)
            self.metacontroller_kubeconfig = self.narrowed_metacontroller()
            cp.start_metacontroller(
                extra_args=self.metacontroller_args, kubeconfig=self.metacontroller_kubeconfig
            )
            self.register_controllers()
            self.timings["total_startup"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        # Webhook configurations first: with failurePolicy Fail and gunicorn gone, every job write fails.
        if self.webhook_configs and any(p.name == "kube-apiserver" for p in self.cp.processes):
            for kind, name in self.webhook_configs:
                with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                    self.cp.kubectl("delete", kind, name, "--ignore-not-found", check=False, timeout=15)
            self.webhook_configs = []
        self.cp.stop()

    # ------------------------------------------------------------------ components
    def _python_env(self) -> dict[str, str]:
        path = os.environ.get("PYTHONPATH", "")
        return {
            **self.server_env,
            "PYTHONPATH": str(REPO) + (os.pathsep + path if path else ""),
            "PYTHONUNBUFFERED": "1",
        }

    def start_webhooks(self) -> ManagedProcess:
        pki = self.cp.pki
        env = {
            **self._python_env(),
            "TRAINOP_WEBHOOK_BIND": f"127.0.0.1:{self.webhook_port}",
            "TRAINOP_TLS_CERT_FILE": str(pki / "webhook.crt"),
            "TRAINOP_TLS_KEY_FILE": str(pki / "webhook.key"),
            "TRAINOP_WEBHOOK_WORKERS": "2",
            "TRAINOP_WEBHOOK_METRICS_BIND": f"127.0.0.1:{self.webhook_metrics_port}",
        }
        argv = [sys.executable, "-m", "gunicorn", "-c", "python:webhooks.gunicorn_conf", "webhooks.app:app"]
        return self.cp.start_process("webhooks", argv, env=env, cwd=REPO)

    def start_hooks(self) -> ManagedProcess:
        env = {
            **self._python_env(),
            "TRAINOP_HOOK_BIND": f"127.0.0.1:{self.hook_port}",
            "TRAINOP_HOOK_WORKERS": str(self.hook_workers),
            "TRAINOP_KUBECONFIG": str(self.cp.kubeconfig),
            "TRAINOP_HOOK_METRICS_BIND": f"127.0.0.1:{self.hook_metrics_port}",
            "TRAINOP_GANG_SCHEDULER": self.gang_scheduler,
        }
        argv = [sys.executable, "-m", "gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:app"]
        return self.cp.start_process("hooks", argv, env=env, cwd=REPO)

    def wait_webhooks_healthy(self, proc: ManagedProcess) -> None:
        ctx = ssl.create_default_context(cafile=str(self.cp.pki / "ca.crt"))
        self.cp.wait_http(
            "webhooks /healthz over TLS",
            f"https://127.0.0.1:{self.webhook_port}/healthz",
            ctx,
            timeout=60,
            watch=[proc],
        )

    def wait_hooks_healthy(self, proc: ManagedProcess) -> None:
        self.cp.wait_http(
            "hooks /healthz", f"http://127.0.0.1:{self.hook_port}/healthz", None, timeout=60, watch=[proc]
        )

    def register_webhooks(self, timeout: float = 60.0) -> None:
        configs = webhook_configurations(f"https://127.0.0.1:{self.webhook_port}", self.cp.ca_bundle_b64())
        self.cp.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": configs}))
        self.webhook_configs = [(c["kind"].lower(), c["metadata"]["name"]) for c in configs]
        invalid = job("XGBoostJob", "e2e-webhook-probe", {"Worker": replica("XGBoostJob")})
        valid = job("XGBoostJob", "e2e-webhook-probe", {"Master": replica("XGBoostJob")})

        def denied() -> bool:
            res = self.cp.kubectl(
                "create",
                "--dry-run=server",
                "-n",
                "default",
                "-f",
                "-",
                input=json.dumps(invalid),
                check=False,
            )
            return res.returncode != 0 and PROBE_MESSAGE in res.stderr

        def defaulted() -> bool:
            res = self.cp.kubectl(
                "create", "--dry-run=server", "-n", "default", "-o", "json", "-f", "-",
                input=json.dumps(valid), check=False,
            )  # fmt: skip
            if res.returncode != 0:
                return False
            spec = json.loads(res.stdout)["spec"]
            return bool(spec.get("runPolicy", {}).get("cleanPodPolicy") == "None")

        self.cp.wait_until("validating webhook effective", denied, timeout=timeout, interval=0.3)
        self.cp.wait_until("mutating webhook effective", defaulted, timeout=timeout, interval=0.3)

    def register_controllers(self, timeout: float = 60.0) -> None:
        ccs = composite_controllers(f"http://127.0.0.1:{self.hook_port}", self.resync_override)
        group = podgroup_child(self.gang_scheduler)
        if group is not None:
            for cc in ccs:
                cc["spec"]["childResources"].append(group.rule())
        self.cp.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": ccs}))
        self.controllers = [c["metadata"]["name"] for c in ccs]
        self.resync_period_seconds = max(int(c["spec"]["resyncPeriodSeconds"]) for c in ccs)
        self.wait_controllers_started(0, timeout)

    def wait_controllers_started(self, log_offset: int, timeout: float = 60.0) -> None:
        """Wait until Metacontroller's log (from ``log_offset``) says every CompositeController started.

        Its JSON line "Starting CompositeController" carries the controller object, whose name is
        matched as the JSON string ``"name":"<controller>"``.
        """
        log = self.process("metacontroller").log_path

        def started() -> bool:
            with log.open("rb") as fh:
                fh.seek(log_offset)
                text = fh.read().decode(errors="replace")
            lines = [ln for ln in text.splitlines() if "Starting CompositeController" in ln]
            return all(any(f'"name":"{n}"' in ln for ln in lines) for n in self.controllers)

        self.cp.wait_until("CompositeControllers started", started, timeout=timeout, interval=0.2)

    def restart_metacontroller(self, extra_args: Sequence[str] = ()) -> None:
        """Replace the running Metacontroller by one started with the chart's flags plus ``extra_args``."""
        old = self.process("metacontroller")
        self.cp.stop_process(old)
        offset = old.log_path.stat().st_size  # the new process appends to the same log
        self.metacontroller_args = list(extra_args)
        self.cp.start_metacontroller(
            extra_args=self.metacontroller_args, kubeconfig=self.metacontroller_kubeconfig
        )
        self.wait_controllers_started(offset)

    def narrowed_metacontroller(self) -> Path:
        """A kubeconfig for Metacontroller as the chart runs it: a ServiceAccount bound to the chart's
        narrowed ClusterRole (values.yaml metacontroller.clusterRole), so the whole tier runs with it."""
        rules = yaml.safe_load(CHART_VALUES.read_text())["metacontroller"]["clusterRole"]["rules"]
        name = "e2e-metacontroller"
        objects = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": name}},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": rules,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": name}],
            },
        ]
        self.cp.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        # Longer than any session; an apiserver restart (test_e2e_faults) keeps the signing key.
        token = self.cp.kubectl("create", "token", name, "-n", name, "--duration=12h").stdout.strip()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "e2e",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {
                        "server": self.cp.server,
                        "certificate-authority": str(self.cp.pki / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": name}}],
        }
        path = self.cp.work_dir / "metacontroller.kubeconfig"
        path.write_text(json.dumps(config, indent=1))
        return path

    # ------------------------------------------------------------------ helpers
    @property
    def kubeconfig(self) -> Path:
        return self.cp.kubeconfig

    def process(self, name: str) -> ManagedProcess:
        """The most recently started process of that name."""
        for p in reversed(self.cp.started):
            if p.name == name:
                return p
        raise KeyError(name)

    def kubectl(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl(*args, **kw)

    def wait_until(
        self, what: str, check: Callable[[], bool], timeout: float = 60.0, interval: float = 0.25
    ) -> None:
        self.cp.wait_until(what, check, timeout=timeout, interval=interval)

    def log_tails(self, limit: int = 3000) -> str:
        """Tails of the logs that explain most failures; other components only if they died."""
        sizes = {"hooks": limit, "webhooks": limit, "metacontroller": limit, "kube-apiserver": limit // 2,
                 "kube-controller-manager": limit // 3, "kwok": limit // 3}  # fmt: skip
        parts = [f"work dir (all logs): {self.work_dir}"]
        for p in sorted(self.cp.started, key=lambda p: list(sizes).index(p.name) if p.name in sizes else 99):
            if p.alive() and p.name not in sizes:
                continue
            state = "running" if p.alive() else f"EXITED {p.popen.returncode}"
            size = sizes.get(p.name, limit)
            parts.append(f"--- {p.name} [{state}] {p.log_path} (last {size} bytes):\n{p.tail(size)}")
        return "\n".join(parts)


class Kubectl(Protocol):
    """Whatever runs kubectl against the cluster: a stack, a control plane, a Helm release."""

    def kubectl(
        self, *args: str, input: str | None = ..., check: bool = ..., timeout: float = ...
    ) -> subprocess.CompletedProcess[str]: ...


class Namespace:
    """kubectl and waits scoped to one namespace of the e2e cluster."""

    def __init__(self, stack: Kubectl, name: str) -> None:
        self.stack = stack
        self.name = name

    # ---------------------------------------------------------------- kubectl
    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        return self.stack.kubectl("-n", self.name, *args, input=input, check=check, timeout=timeout)

    def apply(self, obj: dict[str, Any] | str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        text = obj if isinstance(obj, str) else json.dumps(obj)
        return self.kubectl("apply", "-f", "-", input=text, check=check)

    def create(self, obj: dict[str, Any] | str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        text = obj if isinstance(obj, str) else json.dumps(obj)
        return self.kubectl("create", "-f", "-", input=text, check=check)

    def get(self, ref: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.kubectl("get", ref, "-o", "json").stdout)
        return data

    def exists(self, ref: str) -> bool:
        res = self.kubectl("get", ref, "-o", "name", "--ignore-not-found", check=False)
        return res.returncode == 0 and bool(res.stdout.strip())

    def items(self, resource: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["get", resource, "-o", "json"]
        if selector:
            args += ["-l", selector]
        items: list[dict[str, Any]] = json.loads(self.kubectl(*args).stdout)["items"]
        return items

    def job_children(self, resource: str, job_name: str, *, live: bool = True) -> dict[str, dict[str, Any]]:
        """Pods/services of a job by name; ``live`` leaves out objects being deleted."""
        objs = self.items(resource, f"training.kubeflow.org/job-name={job_name}")
        return {
            o["metadata"]["name"]: o for o in objs if not (live and o["metadata"].get("deletionTimestamp"))
        }

    # ---------------------------------------------------------------- waits
    def wait_for(self, ref: str, condition: str, timeout: float = 60.0) -> None:
        """``kubectl wait --for=condition=<condition>``; raises with the object's status on timeout."""
        res = self.kubectl(
            "wait", f"--for=condition={condition}", f"--timeout={int(timeout)}s", ref,
            check=False, timeout=timeout + 30,
        )  # fmt: skip
        if res.returncode != 0:
            status = self.kubectl("get", ref, "-o", "jsonpath={.status}", check=False).stdout
            raise AssertionError(
                f"kubectl wait --for=condition={condition} {ref} failed ({res.returncode}): "
                f"{res.stderr.strip()}\nstatus: {status}"
            )

    def wait_until(
        self, what: str, check: Callable[[], bool], timeout: float = 60.0, interval: float = 0.25
    ) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                if check():
                    return
            except (ControlPlaneError, KeyError, ValueError, subprocess.SubprocessError) as e:
                last = e
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout:.0f}s waiting for {what} (last error: {last})"
                )
            time.sleep(interval)

    def wait_children(
        self, resource: str, job_name: str, names: set[str], timeout: float = 60.0
    ) -> dict[str, dict[str, Any]]:
        """Wait until the job's live ``resource`` objects are exactly ``names``; returns them."""
        seen: dict[str, dict[str, Any]] = {}

        def check() -> bool:
            nonlocal seen
            seen = self.job_children(resource, job_name)
            return set(seen) == names

        try:
            self.wait_until(f"{resource} of {job_name} == {sorted(names)}", check, timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; last seen {sorted(seen)}") from None
        return seen

    def wait_phase(self, pod: str, phase: str, timeout: float = 60.0) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def check() -> bool:
            nonlocal found
            found = self.get(f"pod/{pod}")
            return bool(found.get("status", {}).get("phase") == phase)

        self.wait_until(f"pod/{pod} phase {phase}", check, timeout)
        return found

    def condition(self, ref: str, ctype: str) -> dict[str, Any] | None:
        for cond in self.get(ref).get("status", {}).get("conditions") or []:
            if cond.get("type") == ctype:
                return dict(cond)
        return None


@contextlib.contextmanager
def scratch_namespace(stack: TrainopStack, prefix: str) -> Iterator[Namespace]:
    """A fresh namespace `<prefix>-<random>` on a stack of a test module's own, deleted afterwards
    without waiting."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    stack.cp.create_namespace(name)
    try:
        yield Namespace(stack, name)
    finally:
        stack.kubectl("delete", "namespace", name, "--wait=false", check=False)
