"""Kubeflow Trainer v2.3.0's own controller (built by hack/build-trainer.sh) on an e2e control plane.

The reference a TrainJob served by trainop is compared with. It runs out of cluster like JobSet's
(tests/e2e/jobset_controller.py): the admin kubeconfig, a configuration file with certificate management
and leader election off, its webhooks on a loopback port with the test PKI's serving certificate (in the
folder controller-runtime reads by default, under ``$TMPDIR``: Trainer's configuration has no cert dir),
and its own webhook configurations with ``url:`` clients. docs/build.md#trainer-from-source.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane, ManagedProcess, built_by, default_cache_dir, free_ports
from jobset_controller import jobset_dir
from webhook_urls import serving_webhooks, write_serving_cert

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "build-trainer.sh"


def trainer_dir(cache: Path | None = None) -> Path:
    return (cache or default_cache_dir()) / "trainer"


def shipped_runtimes() -> dict[str, dict[str, Any]]:
    """The ClusterTrainingRuntimes Trainer v2.3.0 ships, by name."""
    out = {}
    for path in sorted((trainer_dir() / "runtimes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out[doc["metadata"]["name"]] = doc
    return out


def configuration(webhook_port: int, health_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1"},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }


@contextmanager
def running_trainer(cp: ControlPlane) -> Iterator[ManagedProcess]:
    """Trainer's CRDs (and JobSet's, which it watches), its controller and webhooks for the block."""
    binary = built_by(BUILD_SCRIPT, cp.bin_dir / "trainer-manager", cp.work_dir / "build-trainer.log")
    manifests = trainer_dir()
    cp.apply_crds(
        *sorted((jobset_dir() / "crds").glob("*.yaml")), *sorted((manifests / "crds").glob("*.yaml"))
    )
    tmp = cp.work_dir / "trainer-tmp"
    write_serving_cert(cp.pki, tmp / "k8s-webhook-server" / "serving-certs")
    webhook_port, health_port = free_ports(2)
    config_path = cp.work_dir / "trainer-config.yaml"
    config_path.write_text(yaml.safe_dump(configuration(webhook_port, health_port)))
    argv: list[str | Path] = [binary, f"--config={config_path}"]
    env = {"TMPDIR": str(tmp)}
    with serving_webhooks(
        cp, "trainer", argv, env, manifests / "webhook", (webhook_port, health_port)
    ) as proc:
        yield proc
