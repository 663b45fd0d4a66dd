"""Kubeflow Training Operator v1.9.4 itself, run out of cluster on its own e2e control plane.

Built by ``hack/build-kubeflow.sh`` into the e2e cache (binary in ``bin/``, its CRDs and examples in
``kubeflow/``). Started as its source's README says: ``MY_POD_NAMESPACE=kubeflow``, the namespace
``kubeflow`` with an empty Secret ``training-operator-webhook-cert`` for its certificate rotator, and a
serving certificate in the fixed directory ``/tmp/k8s-webhook-server/serving-certs``. Its validating
webhooks are not registered with the apiserver: the differential test applies only valid jobs, and
Kubeflow defaults jobs in memory, not through admission, so nothing it does to a job is lost.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from controlplane import (
    ControlPlane,
    ManagedProcess,
    built_by,
    default_cache_dir,
    free_ports,
)

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-kubeflow.sh"
# Fixed by Kubeflow's pkg/cert (certDir); not configurable by flag.
KUBEFLOW_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
OPERATOR_NAMESPACE = "kubeflow"
SCHEMES = ("tfjob", "pytorchjob", "xgboostjob", "mpijob", "paddlejob", "jaxjob")
# Throughput only, no behaviour (a job is still handled by one worker at a time): at its defaults (20 QPS
# shared by job writes and the Event sink, one worker per kind) every case running at once queues
# Kubeflow's work for seconds. Raised so checkpoints do not wait on a backlog.
CLIENT_FLAGS = ("--kube-api-qps=500", "--kube-api-burst=1000", "--controller-threads=4")
# controller-runtime logs this once per controller when its workers run.
STARTED_LINE = "Starting workers"


def kubeflow_dir(cache: Path | None = None) -> Path:
    """CRDs and examples copied from Kubeflow's source by the build script."""
    return (cache or default_cache_dir()) / "kubeflow"


def ensure_kubeflow_binary(bin_dir: Path, log_path: Path) -> Path:
    """Build (or reuse, <1 s warm) Kubeflow's training-operator; raise ControlPlaneError if it is missing."""
    return built_by(BUILD_SCRIPT, bin_dir / "training-operator", log_path)


def _public_key(args: list[str]) -> bytes:
    res = subprocess.run(["openssl", *args], capture_output=True)
    return res.stdout if res.returncode == 0 else b""


def install_serving_cert(cp: ControlPlane, cert_dir: Path = KUBEFLOW_CERT_DIR) -> None:
    """Put a serving certificate where Kubeflow's rotator waits for one, unless a matching pair is there.

    Any valid pair will do (its webhooks are not registered), but a certificate and key from two
    different runs would stop its webhook server, so a pair whose public keys differ is replaced. Each
    file is written by rename so a concurrent run never reads half a file.
    """
    cert_dir.mkdir(parents=True, exist_ok=True)
    crt, key = cert_dir / "tls.crt", cert_dir / "tls.key"
    if crt.exists() and key.exists():
        from_cert = _public_key(["x509", "-noout", "-pubkey", "-in", str(crt)])
        if from_cert and from_cert == _public_key(["pkey", "-pubout", "-in", str(key)]):
            return
    for src, dst in (("webhook.key", "tls.key"), ("webhook.crt", "tls.crt"), ("ca.crt", "ca.crt")):
        tmp = cert_dir / f".{dst}.{os.getpid()}"
        tmp.write_bytes((cp.pki / src).read_bytes())
        tmp.chmod(0o600)
        tmp.replace(cert_dir / dst)


class KubeflowStack:
    """A ControlPlane with Kubeflow's CRDs and its training-operator running against it."""

    def __init__(
        self,
        work_dir: Path,
        bin_dir: Path,
        binary: Path,
        crds: Path,
        client_flags: tuple[str, ...] = CLIENT_FLAGS,
    ) -> None:
        """`client_flags`: the operator's client rate and workers; () runs it at its own defaults."""
        self.cp = ControlPlane(bin_dir, work_dir)
        self.binary = binary
        self.crds = crds
        self.client_flags = client_flags
        self.operator: ManagedProcess | None = None
        self.metrics_url = ""

    def __enter__(self) -> KubeflowStack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 120.0) -> KubeflowStack:
        cp = self.cp
        try:
            # CRDs before KCM, so its garbage collector knows the job kinds from the start.
            cp.start(crds=[self.crds])
            cp.create_namespace(OPERATOR_NAMESPACE)
            cp.kubectl(
                "create", "secret", "generic", "training-operator-webhook-cert", "-n", OPERATOR_NAMESPACE
            )
            install_serving_cert(cp)
            health, webhook, metrics = free_ports(3)
            self.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
            argv = [
                str(self.binary), f"--metrics-bind-address=127.0.0.1:{metrics}",
                f"--health-probe-bind-address=127.0.0.1:{health}", f"--webhook-server-port={webhook}",
                *(f"--enable-scheme={s}" for s in SCHEMES), *self.client_flags,
            ]  # fmt: skip
            self.operator = cp.start_process(
                "training-operator", argv, env={"MY_POD_NAMESPACE": OPERATOR_NAMESPACE}
            )
            cp.wait_http(
                "training-operator /healthz", f"http://127.0.0.1:{health}/healthz", None, timeout,
                watch=[self.operator],
            )  # fmt: skip
            log = self.operator.log_path
            cp.wait_until(
                f"{len(SCHEMES)} Kubeflow controllers started",
                lambda: log.read_text(errors="replace").count(STARTED_LINE) >= len(SCHEMES),
                timeout=timeout,
                watch=[self.operator],
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.cp.stop()

    def log_tails(self, limit: int = 3000) -> str:
        parts = [f"work dir (all logs): {self.cp.work_dir}"]
        for p in self.cp.started:
            if p.name == "training-operator" or not p.alive():
                state = "running" if p.alive() else f"EXITED {p.popen.returncode}"
                parts.append(f"--- {p.name} [{state}] {p.log_path}:\n{p.tail(limit)}")
        return "\n".join(parts)
