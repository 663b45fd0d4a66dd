"""Fixtures for the image tests: the image of this work tree, the chart's Deployments as rendered by helm,
and the hook and webhook servers running from the image as those Deployments configure them.

The image comes from hack/build-image.sh (through tests/e2e/images.py); helm and the packaged
Metacontroller chart from hack/build-control-plane.sh, as for the e2e suite. Anything missing fails the
tests (never skips them): hack/test.sh builds both first.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import default_bin_dir, default_cache_dir, free_ports
from tests.e2e.images import Container, deployment_pod_specs, ensure_image, run_pod

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "trainop"
COMPONENT_LABEL = "app.kubernetes.io/component"


PACKAGES = ("hooks", "webhooks", "trainop")


def work_tree_hashes() -> dict[str, str]:
    """{path: sha256} of every Python file of the project's packages in the work tree."""
    return {
        str(f.relative_to(REPO)): hashlib.sha256(f.read_bytes()).hexdigest()
        for name in PACKAGES
        for f in (REPO / name).rglob("*.py")
    }


@pytest.fixture(scope="session")
def built() -> tuple[str, dict[str, str]]:
    """The image, and the work tree's sources as they were when it was built (others may edit them later)."""
    sources = work_tree_hashes()
    return ensure_image(), sources


@pytest.fixture(scope="session")
def image(built: tuple[str, dict[str, str]]) -> str:
    return built[0]


def _helm_template(tmp: Path, *set_values: str) -> list[dict[str, Any]]:
    helm = default_bin_dir() / "helm"
    packaged = sorted((default_cache_dir() / "charts").glob("metacontroller-helm-*.tgz"))
    if not helm.exists() or not packaged:
        pytest.fail(f"helm or the packaged Metacontroller chart is missing; run hack/build-control-plane.sh "
                    f"(looked for {helm} and {default_cache_dir() / 'charts'})")  # fmt: skip
    # The chart's dependency where `helm dependency build` would put it, in a copy of the chart.
    chart = tmp / "trainop"
    shutil.copytree(CHART, chart, ignore=shutil.ignore_patterns("charts"))
    (chart / "charts").mkdir()
    shutil.copy(packaged[-1], chart / "charts")
    done = subprocess.run(
        [str(helm), "template", "trainop", str(chart), "--namespace", "trainop-system",
         *(a for v in set_values for a in ("--set", v))],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"helm template failed:\n{done.stderr}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="session")
def chart_manifests(tmp_path_factory: pytest.TempPathFactory, webhook_pki: Path) -> list[dict[str, Any]]:
    """The chart with a certificate of our own (webhooks.caBundle set): the webhooks then serve the mounted
    Secret's files. The default, a certificate the server keeps itself, needs an apiserver (tests/e2e)."""
    ca_bundle = base64.b64encode((webhook_pki / "ca.crt").read_bytes()).decode()
    return _helm_template(tmp_path_factory.mktemp("chart"), f"webhooks.caBundle={ca_bundle}")


@pytest.fixture(scope="session")
def config_maps(chart_manifests: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The release's ConfigMaps by name, for the pods' configMap volumes (the accelerator profiles)."""
    return {m["metadata"]["name"]: m.get("data") or {} for m in chart_manifests if m["kind"] == "ConfigMap"}


@pytest.fixture(scope="session")
def pod_specs(chart_manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    pods = deployment_pod_specs(chart_manifests)
    assert {"hooks", "webhooks"} <= set(pods), f"chart Deployments by component: {sorted(pods)}"
    return pods


def openssl(cwd: Path, *args: str) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")


@pytest.fixture(scope="session")
def webhook_pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.crt and a serving certificate (tls.crt/tls.key) for 127.0.0.1 signed by it."""
    pki = tmp_path_factory.mktemp("pki")
    openssl(pki, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "2", "-subj", "/CN=image-test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    (pki / "tls.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl(pki, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr",
            "-subj", "/CN=trainop-webhooks")  # fmt: skip
    openssl(pki, "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "tls.crt", "-days", "2", "-extfile", "tls.ext")  # fmt: skip
    # Private to this user on the host, as a key should be; run_pod hands the container a readable copy.
    (pki / "tls.key").chmod(0o600)
    return pki


class Server:
    def __init__(self, container: Container, port: int) -> None:
        self.container = container
        self.port = port


@pytest.fixture(scope="module")
def hooks_server(
    image: str, pod_specs: dict[str, dict[str, Any]], config_maps: dict[str, dict[str, str]]
) -> Iterator[Server]:
    port, metrics = free_ports(2)
    # Host network: every port on loopback, the metrics one too (its default would collide).
    env = {"TRAINOP_HOOK_BIND": f"127.0.0.1:{port}", "TRAINOP_HOOK_METRICS_BIND": f"127.0.0.1:{metrics}"}
    pod, name = pod_specs["hooks"], f"image-test-hooks-{port}"
    with run_pod(image, pod, name=name, env=env, config_maps=config_maps) as container:
        container.wait_ready(port)
        yield Server(container, port)


@pytest.fixture(scope="module")
def webhooks_server(
    image: str,
    pod_specs: dict[str, dict[str, Any]],
    webhook_pki: Path,
    config_maps: dict[str, dict[str, str]],
) -> Iterator[Server]:
    port, metrics = free_ports(2)
    tls = {"tls.crt": webhook_pki / "tls.crt", "tls.key": webhook_pki / "tls.key"}
    env = {
        "TRAINOP_WEBHOOK_BIND": f"127.0.0.1:{port}",
        "TRAINOP_WEBHOOK_METRICS_BIND": f"127.0.0.1:{metrics}",
    }
    name = f"image-test-webhooks-{port}"
    pod = pod_specs["webhooks"]
    with run_pod(image, pod, name=name, env=env, secrets={"tls": tls}, config_maps=config_maps) as container:
        container.wait_ready(port)
        yield Server(container, port)
