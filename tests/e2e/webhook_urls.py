"""A controller's webhook configurations, as its kustomize build makes them, served out of cluster.

JobSet and Trainer ship their webhook configurations with ``service:`` clients and kustomize JSON patches;
run out of cluster on a loopback port, each webhook gets a ``url:`` client on that port with the test CA.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jsonpatch
import yaml
from controlplane import ControlPlane, ManagedProcess

# Each controller's patch file per configuration kind (the names their kustomizations give them).
PATCH_FILES = {
    "jobset": {
        "MutatingWebhookConfiguration": "mutating-patch.yaml",
        "ValidatingWebhookConfiguration": "validating-patch.yaml",
    },
    "trainer": {
        "MutatingWebhookConfiguration": "patch_mutating.yaml",
        "ValidatingWebhookConfiguration": "patch_validating.yaml",
    },
}


def url_webhook_configurations(
    manifests: Path, controller: str, port: int, ca_bundle: str
) -> list[dict[str, Any]]:
    """``manifests/manifests.yaml`` with the controller's patches applied, each client a URL on ``port``.

    Each configuration is named ``<controller>-<its name>`` so two controllers' never collide.
    """
    configs = [d for d in yaml.safe_load_all((manifests / "manifests.yaml").read_text()) if d]
    out = []
    for config in configs:
        ops = yaml.safe_load((manifests / PATCH_FILES[controller][config["kind"]]).read_text())
        patched: dict[str, Any] = jsonpatch.apply_patch(config, ops)
        for webhook in patched["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        patched["metadata"] = {"name": f"{controller}-{patched['metadata']['name']}"}
        out.append(patched)
    return out


def write_serving_cert(pki: Path, cert_dir: Path) -> Path:
    """The test PKI's webhook serving pair as controller-runtime reads it (tls.crt, tls.key in a folder)."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    (cert_dir / "tls.crt").write_bytes((pki / "webhook.crt").read_bytes())
    (cert_dir / "tls.key").write_bytes((pki / "webhook.key").read_bytes())
    return cert_dir


@contextmanager
def serving_webhooks(
    cp: ControlPlane,
    controller: str,
    argv: list[str | Path],
    env: dict[str, str],
    manifests: Path,
    ports: tuple[int, int],
) -> Iterator[ManagedProcess]:
    """Run a controller whose webhooks listen on ``ports[0]`` and readiness on ``ports[1]``; register
    its webhook configurations once it is ready, and remove them (then stop it) when the block ends."""
    webhook_port, health_port = ports
    proc = cp.start_process(controller, argv, env={"KUBECONFIG": str(cp.kubeconfig), **env})
    configs = url_webhook_configurations(manifests, controller, webhook_port, cp.ca_bundle_b64())
    try:
        url = f"http://127.0.0.1:{health_port}/readyz"
        cp.wait_http(f"{controller} /readyz", url, None, timeout=60, watch=[proc])
        listed = {"apiVersion": "v1", "kind": "List", "items": configs}
        cp.kubectl("apply", "-f", "-", input=json.dumps(listed))
        yield proc
    finally:
        for config in configs:
            kind, name = config["kind"].lower(), config["metadata"]["name"]
            cp.kubectl("delete", kind, name, "--ignore-not-found", check=False)
        cp.stop_process(proc)
