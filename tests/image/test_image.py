"""The project's image, built from the Dockerfile by hack/build-image.sh, runs the chart's servers.

Each server runs as its Deployment in the rendered chart configures it (command, env, uid 65532, read-only
root filesystem with a tmpfs /tmp, no capabilities), on the host network at a loopback port.
"""

from __future__ import annotations

import json
import ssl
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import admission_review, job
from tests.e2e.images import podman, run_command, save_image
from tests.image.conftest import PACKAGES, Server

pytestmark = pytest.mark.image

REPO = Path(__file__).resolve().parents[2]

# Prints {relative path: sha256} of every Python file of the packages as the image's Python imports
# them: -I keeps the working directory (/app, the copied sources) off sys.path, so this is site-packages.
INSTALLED_HASHES = """
import hashlib, importlib, json, pathlib
out = {}
for name in %r:
    root = pathlib.Path(importlib.import_module(name).__file__).parent
    for f in root.rglob("*.py"):
        out[str(f.relative_to(root.parent))] = hashlib.sha256(f.read_bytes()).hexdigest()
print(json.dumps(out))
"""


def process_ids(server: Server) -> tuple[str, str]:
    """Real uid and gid of the container's main process (gunicorn's master), from /proc."""
    status = server.container.exec("cat", "/proc/1/status")
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return fields["Uid"].split()[0], fields["Gid"].split()[0]


def get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    with opener.open(url, timeout=10) as response:
        return response.status, response.read()


def post_json(url: str, body: Any, context: ssl.SSLContext | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    with opener.open(request, timeout=10) as response:
        return response.status, json.loads(response.read())


def test_installed_packages_are_this_work_trees_code(built: tuple[str, dict[str, str]]) -> None:
    image, sources = built
    installed = json.loads(run_command(image, ["python", "-I", "-c", INSTALLED_HASHES % (PACKAGES,)]))
    assert installed == sources


def test_the_copied_sources_gunicorn_imports_from_are_this_work_trees_code(
    built: tuple[str, dict[str, str]],
) -> None:
    image, sources = built
    listing = run_command(
        image, ["sh", "-c", "cd /app && find " + " ".join(PACKAGES) + " -name '*.py' | xargs sha256sum"]
    )
    in_image = {path: digest for digest, path in (line.split() for line in listing.splitlines())}
    assert in_image == sources


def test_trainop_command_runs_in_the_image(image: str) -> None:
    assert "usage: trainop" in run_command(image, ["trainop", "--help"])


def test_image_user_is_65532(image: str) -> None:
    config = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == "65532"


@pytest.mark.parametrize("server", ["hooks_server", "webhooks_server"])
def test_server_runs_as_uid_65532_and_group_65532(server: str, request: pytest.FixtureRequest) -> None:
    assert process_ids(request.getfixturevalue(server)) == ("65532", "65532")


@pytest.mark.parametrize("server", ["hooks_server", "webhooks_server"])
def test_server_root_filesystem_is_read_only_and_tmp_is_writable(
    server: str, request: pytest.FixtureRequest
) -> None:
    name = request.getfixturevalue(server).container.name
    refused = podman("exec", name, "touch", "/app/written", check=False)
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr
    podman("exec", name, "touch", "/tmp/written")


def test_hooks_serve_healthz(hooks_server: Server) -> None:
    assert get(f"http://127.0.0.1:{hooks_server.port}/healthz")[0] == 200


def test_webhooks_serve_healthz_over_tls_with_the_mounted_certificate(
    webhooks_server: Server, webhook_pki: Path
) -> None:
    context = ssl.create_default_context(cafile=str(webhook_pki / "ca.crt"))
    assert get(f"https://127.0.0.1:{webhooks_server.port}/healthz", context)[0] == 200


def test_sync_creates_the_pods_and_services_of_a_small_pytorchjob(hooks_server: Server) -> None:
    body = {"parent": job("PyTorchJob", name="tiny", namespace="img", Master=1, Worker=1), "children": {}}
    status, answer = post_json(f"http://127.0.0.1:{hooks_server.port}/sync", body)
    assert status == 200
    assert sorted((c["kind"], c["metadata"]["name"]) for c in answer["children"]) == [
        ("Pod", "tiny-master-0"),
        ("Pod", "tiny-worker-0"),
        ("Service", "tiny-master-0"),
        ("Service", "tiny-worker-0"),
    ]
    assert [c["type"] for c in answer["status"]["conditions"]] == ["Created"]


def test_sync_uses_the_init_image_the_chart_sets(hooks_server: Server, pod_specs: dict[str, Any]) -> None:
    env = {e["name"]: e["value"] for e in pod_specs["hooks"]["containers"][0]["env"]}
    body = {"parent": job("PyTorchJob", name="init", namespace="img", Master=1, Worker=1), "children": {}}
    _, answer = post_json(f"http://127.0.0.1:{hooks_server.port}/sync", body)
    worker = next(c for c in answer["children"] if c["metadata"]["name"] == "init-worker-0")
    assert [c["image"] for c in worker["spec"]["initContainers"]] == [env["TRAINOP_PYTORCH_INIT_IMAGE"]]


def test_webhooks_deny_a_pytorchjob_with_two_masters(webhooks_server: Server, webhook_pki: Path) -> None:
    context = ssl.create_default_context(cafile=str(webhook_pki / "ca.crt"))
    review = admission_review(job("PyTorchJob", name="two-masters", Master=2))
    _, answer = post_json(f"https://127.0.0.1:{webhooks_server.port}/validate", review, context)
    assert answer["response"]["allowed"] is False
    assert "Master must have exactly 1 replica" in answer["response"]["status"]["message"]


def test_saved_archive_is_tagged_with_the_charts_default_image(image: str, tmp_path: Path) -> None:
    chart = yaml.safe_load((REPO / "charts" / "trainop" / "Chart.yaml").read_text())
    archive_path = tmp_path / "trainop.tar"
    try:
        assert save_image(archive_path) == image
        with tarfile.open(archive_path) as archive:
            member = archive.extractfile("manifest.json")
            assert member is not None
            manifest = json.load(member)
    finally:
        archive_path.unlink(missing_ok=True)  # ~250 MB; pytest keeps its temp dirs of the last runs
    assert [entry["RepoTags"] for entry in manifest] == [
        [f"docker.io/library/trainop:{chart['appVersion']}", "docker.io/library/trainop:dev", image]
    ]
