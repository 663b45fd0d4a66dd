"""The release's pieces (hack/release.sh and hack/lib/{versions,oci_archive,release_files}.py), hermetically.

tests/e2e_node/test_release.py cuts a whole release and installs it; these pin down the rules the
pieces follow: one version everywhere, refusing a malformed one, images archived byte for byte and
pinned by digest, and a page that lists every release.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "hack" / "lib"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(LIB))  # oci_archive imports its sibling oci_layout
    spec = importlib.util.spec_from_file_location(name, LIB / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


versions = _load("versions")
oci_archive = _load("oci_archive")
release_files = _load("release_files")
sys.path.insert(0, str(REPO / "tests" / "e2e_node"))
from registry import Layout  # noqa: E402  (the real-node tier's registry reads the layout)

# --------------------------------------------------------------------------------------------- versions


def test_every_file_that_names_the_version_names_the_one_in_pyproject() -> None:
    assert versions.disagreements(versions.current()) == []


def test_trainop_version_prints_the_version_in_pyproject() -> None:
    res = subprocess.run([sys.executable, "-m", "trainop.cli", "--version"], capture_output=True, text=True,
                         cwd=REPO, check=True)  # fmt: skip
    assert res.stdout.strip() == f"trainop {versions.current()}"


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    for rel in {p.path for p in versions.PLACES}:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    return tmp_path


def test_setting_a_version_writes_it_into_every_place_and_nothing_else(repo_copy: Path) -> None:
    before = {rel: (repo_copy / rel).read_text() for rel in {p.path for p in versions.PLACES}}
    versions.write("9.8.7", repo_copy)
    assert versions.current(repo_copy) == "9.8.7"
    assert versions.disagreements("9.8.7", repo_copy) == []
    old = versions.current()
    for rel, text in before.items():
        # Only version strings changed: putting the old one back gives the file as it was.
        assert (repo_copy / rel).read_text().replace("9.8.7", old) == text, rel


def test_a_file_whose_version_moved_is_named_instead_of_skipped(repo_copy: Path) -> None:
    chart = repo_copy / "charts" / "trainop" / "Chart.yaml"
    chart.write_text(chart.read_text().replace("appVersion:", "app_version:"))
    with pytest.raises(versions.VersionError, match=r"charts/trainop/Chart.yaml: the chart's appVersion"):
        versions.write("9.8.7", repo_copy)
    assert (
        "charts/trainop/Chart.yaml: the chart's appVersion"
        in versions.disagreements(versions.current(), repo_copy)[0]
    )


@pytest.mark.parametrize("bad", ["v0.2.0", "0.2", "01.2.3", "0.2.0-rc.1", "0.2.0 "])
def test_release_refuses_a_malformed_version_before_it_touches_anything(bad: str) -> None:
    res = subprocess.run(["bash", str(REPO / "hack" / "release.sh"), bad, "--dist", "/nonexistent/dist"],
                         capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert res.returncode == 2
    assert "VERSION must be MAJOR.MINOR.PATCH, e.g. 0.2.0" in res.stderr
    assert repr(bad) in res.stderr
    assert versions.disagreements(versions.current()) == []


# --------------------------------------------------------------------------------------------- images


def _tar_bytes(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def docker_archive(path: Path, *, lie_about_layer: bool = False) -> tuple[bytes, bytes]:
    """A docker-archive as `podman save` writes it: one image, one uncompressed layer. -> (config, layer)."""
    layer = _tar_bytes({"hello.txt": b"hello\n"})
    diff_id = "sha256:" + hashlib.sha256(b"another layer" if lie_about_layer else layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/hello"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()  # fmt: skip
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": ["docker.io/library/x:1"], "Layers": ["abc/layer.tar"]}]
    path.write_bytes(_tar_bytes({"manifest.json": json.dumps(manifest).encode(), config_name: config,
                                 "abc/layer.tar": layer}))  # fmt: skip
    return config, layer


def archive_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        out = {}
        for m in tar.getmembers():
            data = tar.extractfile(m)
            assert data is not None
            out[m.name] = data.read()
        return out


def test_an_image_gives_the_same_archive_byte_for_byte_every_time(tmp_path: Path) -> None:
    docker_archive(tmp_path / "in.tar")
    first = oci_archive.from_docker_archive(tmp_path / "in.tar", "docker.io/library/x:1", tmp_path / "a.tar")
    second = oci_archive.from_docker_archive(tmp_path / "in.tar", "docker.io/library/x:1", tmp_path / "b.tar")
    assert first == second
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_the_archive_keeps_config_and_layers_unchanged_under_its_manifest_digest(tmp_path: Path) -> None:
    config, layer = docker_archive(tmp_path / "in.tar")
    digest = oci_archive.from_docker_archive(tmp_path / "in.tar", "docker.io/library/x:1", tmp_path / "x.tar")
    files = archive_members(tmp_path / "x.tar")
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["digest"] == digest
    assert entry["annotations"] == {"io.containerd.image.name": "docker.io/library/x:1",
                                    "org.opencontainers.image.ref.name": "1"}  # fmt: skip
    manifest_bytes = files[f"blobs/sha256/{digest[7:]}"]
    assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == digest
    manifest = json.loads(manifest_bytes)
    assert files[f"blobs/sha256/{manifest['config']['digest'][7:]}"] == config
    (layer_desc,) = manifest["layers"]
    assert files[f"blobs/sha256/{layer_desc['digest'][7:]}"] == layer
    assert layer_desc["mediaType"] == "application/vnd.oci.image.layer.v1.tar"


def test_a_layer_that_is_not_the_one_its_config_names_is_refused(tmp_path: Path) -> None:
    docker_archive(tmp_path / "in.tar", lie_about_layer=True)
    with pytest.raises(oci_archive.ArchiveError, match="the config says"):
        oci_archive.from_docker_archive(tmp_path / "in.tar", "docker.io/library/x:1", tmp_path / "x.tar")


def test_an_archive_reference_without_its_registry_is_refused(tmp_path: Path) -> None:
    docker_archive(tmp_path / "in.tar")
    with pytest.raises(oci_archive.ArchiveError, match="HOST/REPOSITORY:TAG"):
        oci_archive.from_docker_archive(tmp_path / "in.tar", "trainop:1", tmp_path / "x.tar")


def test_a_loaded_archive_is_served_by_the_registry_under_its_repository_and_tag(tmp_path: Path) -> None:
    docker_archive(tmp_path / "in.tar")
    digest = oci_archive.from_docker_archive(tmp_path / "in.tar", "docker.io/library/x:1", tmp_path / "x.tar")
    layout = tmp_path / "layout"
    assert oci_archive.load(tmp_path / "x.tar", layout) == ("docker.io/library/x:1", digest)
    served = Layout(layout)
    assert served.tagged("library/x", "1") == (digest, "application/vnd.oci.image.manifest.v1+json")
    assert served.blob(digest) is not None


def test_an_image_copied_from_a_layout_keeps_its_manifest_digest(tmp_path: Path) -> None:
    docker_archive(tmp_path / "in.tar")
    digest = oci_archive.from_docker_archive(tmp_path / "in.tar", "docker.io/library/x:1", tmp_path / "x.tar")
    oci_archive.load(tmp_path / "x.tar", tmp_path / "layout")
    copied = oci_archive.from_layout(tmp_path / "layout", "library/x:1", "ghcr.io/y/x:2", tmp_path / "y.tar")
    assert copied == digest
    assert oci_archive.digest_of(tmp_path / "y.tar") == ("ghcr.io/y/x:2", digest)


# --------------------------------------------------------------------------------------------- manifest

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


def deployment(name: str, component: str, *images: str, init: tuple[str, ...] = ()) -> dict[str, Any]:
    def containers(imgs: tuple[str, ...]) -> list[dict[str, Any]]:
        return [{"name": f"c{i}", "image": img} for i, img in enumerate(imgs)]

    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/component": component}},
            "spec": {"template": {"spec": {"initContainers": containers(init),
                                           "containers": containers(images)}}}}  # fmt: skip


def test_every_container_image_is_pinned_by_its_repository_digest() -> None:
    docs = [deployment("trainop-webhooks", "webhooks", "trainop:0.1.0", init=("trainop:0.1.0",)),
            deployment("mc", "", "ghcr.io/metacontroller/metacontroller:v4.17.2")]  # fmt: skip
    pins = {"docker.io/library/trainop": DIGEST_A, "ghcr.io/metacontroller/metacontroller": DIGEST_B}
    assert release_files.pin_images(docs, pins, None) == []
    webhooks, mc = (d["spec"]["template"]["spec"] for d in docs)
    assert webhooks["containers"][0]["image"] == f"docker.io/library/trainop@{DIGEST_A}"
    assert webhooks["initContainers"][0]["image"] == f"docker.io/library/trainop@{DIGEST_A}"
    assert mc["containers"][0]["image"] == f"ghcr.io/metacontroller/metacontroller@{DIGEST_B}"


def test_an_image_the_release_does_not_ship_is_reported_not_left_on_its_tag() -> None:
    docs = [deployment("side", "hooks", "trainop:0.1.0", "busybox:1.36")]
    unpinned = release_files.pin_images(docs, {"docker.io/library/trainop": DIGEST_A}, None)
    assert unpinned == ["Deployment/side: busybox:1.36"]


def test_the_servers_get_the_shipped_tensorboard_image_by_digest() -> None:
    docs = [deployment("trainop-hooks", "hooks", "trainop:0.1.0"), deployment("mc", "", "trainop:0.1.0")]
    tensorboard = f"docker.io/library/trainop-tensorboard@{DIGEST_B}"
    release_files.pin_images(docs, {"docker.io/library/trainop": DIGEST_A}, tensorboard)
    hooks, mc = (d["spec"]["template"]["spec"]["containers"][0] for d in docs)
    assert hooks["env"] == [{"name": "TRAINOP_TENSORBOARD_IMAGE", "value": tensorboard}]
    assert "env" not in mc


def test_the_hooks_give_jobs_init_containers_of_the_shipped_init_image_by_digest() -> None:
    docs = [deployment("trainop-hooks", "hooks", "trainop:0.1.0"),
            deployment("trainop-webhooks", "webhooks", "trainop:0.1.0")]  # fmt: skip
    hooks_spec = docs[0]["spec"]["template"]["spec"]["containers"][0]
    hooks_spec["env"] = [
        {"name": "TRAINOP_PYTORCH_INIT_IMAGE", "value": "alpine:3.10"},
        {"name": "A", "value": "1"},
    ]
    init_image = f"docker.io/library/trainop-init@{DIGEST_B}"
    release_files.pin_images(docs, {"docker.io/library/trainop": DIGEST_A}, None, init_image)
    hooks, webhooks = (d["spec"]["template"]["spec"]["containers"][0] for d in docs)
    assert hooks["env"] == [
        {"name": "A", "value": "1"},
        {"name": "TRAINOP_PYTORCH_INIT_IMAGE", "value": init_image},
        {"name": "TRAINOP_MPI_KUBECTL_DELIVERY_IMAGE", "value": init_image},
    ]
    assert "env" not in webhooks


def test_namespaces_then_every_crd_come_before_the_objects_that_need_them() -> None:
    crd = {"kind": "CustomResourceDefinition", "metadata": {"name": "tfjobs.kubeflow.org"}}
    mc_crd = {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "compositecontrollers.metacontroller.k8s.io"},
    }
    ns = {"kind": "Namespace", "metadata": {"name": "trainop-system"}}
    cc = {"kind": "CompositeController", "metadata": {"name": "tfjobs"}}
    docs = release_files.install_manifest([ns, crd, cc], [mc_crd])
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Namespace", "metacontroller"), ("Namespace", "trainop-system"),
        ("CustomResourceDefinition", "compositecontrollers.metacontroller.k8s.io"),
        ("CustomResourceDefinition", "tfjobs.kubeflow.org"), ("CompositeController", "tfjobs"),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------- page


def test_the_page_lists_every_release_newest_first_with_its_install_commands(tmp_path: Path) -> None:
    for version in ("0.9.0", "0.10.0", "not-a-release"):
        (tmp_path / version).mkdir()
    (tmp_path / "0.10.0" / "trainop.yaml").write_text("---\n")
    html = release_files.page(tmp_path, "https://example.test/r")
    assert html.index('id="v0.10.0"') < html.index('id="v0.9.0"')
    assert "not-a-release" not in html
    for command in (
        "kubectl apply --server-side -f https://example.test/r/0.10.0/trainop.yaml",
        "helm repo add trainop https://example.test/r/",
        "helm install trainop trainop/trainop --version 0.9.0",
        "pip install https://example.test/r/0.9.0/trainop-0.9.0-py3-none-any.whl",
        "trainop-examples/pytorch:latest https://example.test/r/0.9.0/training-images.tar.gz",
        "kubectl apply -f https://example.test/r/0.9.0/examples/pytorch.yaml",
    ):
        assert command in html
    assert '<a href="0.10.0/trainop.yaml">trainop.yaml</a>' in html


def test_the_page_explains_its_placeholder_address_only_when_it_has_one(tmp_path: Path) -> None:
    (tmp_path / "0.1.0").mkdir()
    explanation = "stands for the address this folder is served from"
    assert explanation in release_files.page(tmp_path, release_files.PLACEHOLDER_BASE_URL)
    assert explanation not in release_files.page(tmp_path, "https://example.test/r")


@pytest.mark.parametrize(("signed", "says"), [(True, "-n trainop-release -s SHA256SUMS.sig"),
                                              (False, "(this release is unsigned)")])  # fmt: skip
def test_the_page_says_how_to_verify_a_release_or_that_it_is_unsigned(
    tmp_path: Path, signed: bool, says: str
) -> None:
    (tmp_path / "0.1.0").mkdir()
    if signed:
        (tmp_path / "0.1.0" / "SHA256SUMS.sig").write_text("sig\n")
    assert says in release_files.page(tmp_path, "https://example.test/r")


# --------------------------------------------------------------------------------------------- signature

SIGNATURE_TOOL = REPO / "hack" / "lib" / "release-signature.sh"


@dataclass(frozen=True)
class SigningKey:
    private: Path
    allowed_signers: Path


def signing_key(folder: Path, name: str) -> SigningKey:
    private = folder / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(private)], check=True
    )
    public = (folder / f"{name}.pub").read_text().strip()
    allowed = folder / f"{name}.allowed_signers"
    allowed.write_text(f'release@trainop namespaces="trainop-release" {public}\n')
    return SigningKey(private, allowed)


def release_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "trainop.yaml").write_text("---\n")
    subprocess.run("sha256sum trainop.yaml >SHA256SUMS", shell=True, cwd=folder, check=True)
    return folder


def signature_tool(*args: str, key: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRAINOP_RELEASE_SIGNING_KEY"}
    if key is not None:
        env["TRAINOP_RELEASE_SIGNING_KEY"] = str(key)
    return subprocess.run(["bash", str(SIGNATURE_TOOL), *args], capture_output=True, text=True, env=env,
                          check=False)  # fmt: skip


def test_a_signed_sha256sums_verifies_against_the_signers_public_key(tmp_path: Path) -> None:
    key = signing_key(tmp_path, "release")
    folder = release_folder(tmp_path / "0.1.0")
    assert signature_tool("sign", str(folder), key=key.private).returncode == 0
    res = signature_tool("verify", str(folder), str(key.allowed_signers))
    assert res.returncode == 0, res.stderr
    assert 'Good "trainop-release" signature for release@trainop' in res.stderr


def test_a_changed_sha256sums_fails_verification(tmp_path: Path) -> None:
    key = signing_key(tmp_path, "release")
    folder = release_folder(tmp_path / "0.1.0")
    signature_tool("sign", str(folder), key=key.private)
    with (folder / "SHA256SUMS").open("a") as sums:
        sums.write(f"{'0' * 64}  planted.yaml\n")
    res = signature_tool("verify", str(folder), str(key.allowed_signers))
    assert res.returncode != 0 and "Signature verification failed" in res.stderr, res.stderr


def test_a_changed_file_fails_verification_though_the_signature_holds(tmp_path: Path) -> None:
    key = signing_key(tmp_path, "release")
    folder = release_folder(tmp_path / "0.1.0")
    signature_tool("sign", str(folder), key=key.private)
    (folder / "trainop.yaml").write_text("kind: Planted\n")
    res = signature_tool("verify", str(folder), str(key.allowed_signers))
    assert res.returncode != 0 and "trainop.yaml: FAILED" in res.stdout, res.stdout + res.stderr


def test_a_signature_by_another_key_fails_verification(tmp_path: Path) -> None:
    ours, theirs = signing_key(tmp_path, "release"), signing_key(tmp_path, "other")
    folder = release_folder(tmp_path / "0.1.0")
    signature_tool("sign", str(folder), key=theirs.private)
    res = signature_tool("verify", str(folder), str(ours.allowed_signers))
    assert res.returncode != 0, res.stderr


def test_signing_without_a_key_names_the_variable_to_set(tmp_path: Path) -> None:
    res = signature_tool("sign", str(release_folder(tmp_path / "0.1.0")))
    assert res.returncode == 2 and "TRAINOP_RELEASE_SIGNING_KEY is not set" in res.stderr


def test_a_release_without_a_signing_key_is_refused_unless_asked_unsigned(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRAINOP_RELEASE_SIGNING_KEY"}
    res = subprocess.run(["bash", str(REPO / "hack" / "release.sh"), "0.1.0", "--dist", str(tmp_path)],
                         capture_output=True, text=True, env=env, cwd=REPO, check=False)  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert "TRAINOP_RELEASE_SIGNING_KEY is not set" in res.stderr and "--unsigned" in res.stderr
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------- chart values

DIGEST = "sha256:" + "ab" * 32
CHART_VALUES = REPO / "charts" / "trainop" / "values.yaml"


def pinned_values() -> str:
    return release_files.pin_chart_values(
        CHART_VALUES.read_text(),
        f"0.1.0@{DIGEST}",
        f"docker.io/library/trainop-tensorboard:0.1.0@{DIGEST}",
        f"v4.17.2@{DIGEST}",
        f"docker.io/library/trainop-init:0.1.0@{DIGEST}",
    )


def test_the_packaged_chart_s_values_pin_the_images_of_the_release_by_digest() -> None:
    values = yaml.safe_load(pinned_values())
    assert values["image"]["tag"] == f"0.1.0@{DIGEST}"
    assert values["tensorboard"]["image"] == f"docker.io/library/trainop-tensorboard:0.1.0@{DIGEST}"
    assert values["metacontroller"]["image"] == {"tag": f"v4.17.2@{DIGEST}"}
    init_image = f"docker.io/library/trainop-init:0.1.0@{DIGEST}"
    assert (values["pytorchInitImage"], values["mpiKubectlDeliveryImage"]) == (init_image, init_image)


def test_pinning_the_chart_s_values_changes_nothing_else_and_keeps_the_comments() -> None:
    original, pinned = yaml.safe_load(CHART_VALUES.read_text()), yaml.safe_load(pinned_values())
    for values in (original, pinned):
        values["image"].pop("tag")
        values["tensorboard"].pop("image")
        values["metacontroller"].pop("image", None)
        values.pop("pytorchInitImage")
        values.pop("mpiKubectlDeliveryImage")
    assert pinned == original
    comments = [line for line in CHART_VALUES.read_text().splitlines() if line.lstrip().startswith("#")]
    assert set(comments) <= set(pinned_values().splitlines())


def test_a_reference_without_a_digest_is_refused() -> None:
    with pytest.raises(release_files.ReleaseError, match=r"--image-tag .0\.1\.0.: expected NAME@sha256:"):
        release_files.pin_chart_values(
            CHART_VALUES.read_text(), "0.1.0", f"tb@{DIGEST}", f"v1@{DIGEST}", f"init@{DIGEST}"
        )


def test_an_init_image_without_a_digest_is_refused() -> None:
    with pytest.raises(release_files.ReleaseError, match=r"--init-image .trainop-init:0\.1\.0.: expected"):
        release_files.pin_chart_values(
            CHART_VALUES.read_text(), f"0.1.0@{DIGEST}", f"tb@{DIGEST}", f"v1@{DIGEST}", "trainop-init:0.1.0"
        )


def test_values_without_a_place_to_pin_are_refused() -> None:
    text = CHART_VALUES.read_text().replace("\ntensorboard:\n", "\nboard:\n")
    with pytest.raises(release_files.ReleaseError, match=r"no tensorboard\.image to pin"):
        release_files.pin_chart_values(text, f"0.1.0@{DIGEST}", f"tb@{DIGEST}", f"v1@{DIGEST}", f"i@{DIGEST}")


def test_values_without_the_init_images_to_pin_are_refused() -> None:
    text = CHART_VALUES.read_text().replace("\nmpiKubectlDeliveryImage:", "\nmpiImage:")
    with pytest.raises(release_files.ReleaseError, match=r"no mpiKubectlDeliveryImage to pin"):
        release_files.pin_chart_values(text, f"0.1.0@{DIGEST}", f"tb@{DIGEST}", f"v1@{DIGEST}", f"i@{DIGEST}")
