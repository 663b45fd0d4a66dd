"""The real JobSet controller (v0.12.0, built by hack/build-jobset.sh) on an e2e control plane.

It runs out of cluster as Metacontroller does: the admin kubeconfig, a configuration file that switches its
internal certificate rotation off (that rotator writes a Secret and patches the webhook configurations of a
Service in ``jobset-system``) and serves its webhooks on a loopback port with the test PKI's serving
certificate, and its own webhook configurations (the vendored manifests and their kustomize patches)
registered with ``url:`` clients. docs/build.md#jobset-from-source says why each piece is there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from controlplane import (
    ControlPlane,
    ManagedProcess,
    built_by,
    default_cache_dir,
    free_ports,
)
from webhook_urls import serving_webhooks, write_serving_cert

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-jobset.sh"
# What the JobSet controller sets on every pod it makes (its pod webhooks select pods by it).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def jobset_dir(cache: Path | None = None) -> Path:
    return (cache or default_cache_dir()) / "jobset"


def ensure_jobset_binary(bin_dir: Path, log_path: Path) -> Path:
    """Build (or reuse, <1 s when built) JobSet's manager; raise ControlPlaneError if it is missing."""
    return built_by(BUILD_SCRIPT, bin_dir / "jobset-manager", log_path)


def configuration(webhook_port: int, health_port: int, cert_dir: Path) -> dict[str, Any]:
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        # "0" switches the metrics endpoint off: nothing here scrapes it.
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }


@contextmanager
def running_jobset(cp: ControlPlane) -> Iterator[ManagedProcess]:
    """JobSet's CRD, its controller and its webhooks on ``cp`` for the duration of the block.

    The CRD stays (the control plane's teardown removes everything); the webhook configurations go
    with the controller, so nothing outside the block depends on a stopped webhook server.
    """
    binary = ensure_jobset_binary(cp.bin_dir, cp.work_dir / "build-jobset.log")
    manifests = jobset_dir()
    cp.apply_crds(*sorted((manifests / "crds").glob("*.yaml")))
    cert_dir = write_serving_cert(cp.pki, cp.work_dir / "jobset-certs")
    webhook_port, health_port = free_ports(2)
    config_path = cp.work_dir / "jobset-config.yaml"
    config_path.write_text(yaml.safe_dump(configuration(webhook_port, health_port, cert_dir)))
    argv: list[str | Path] = [binary, f"--config={config_path}"]
    with serving_webhooks(cp, "jobset", argv, {}, manifests / "webhook", (webhook_port, health_port)) as proc:
        yield proc
