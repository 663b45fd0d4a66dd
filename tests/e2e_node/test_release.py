"""A release installs from its own files alone: `hack/release.sh`, then everything from dist/ over HTTP.

`hack/release.sh <the current version> --dist <tmp>` cuts the release this work tree would ship, and a
loopback HTTP server serves that folder, as a user's web server would. Then, with no file of this
repository:

* the wheel, `pip install`ed into a new venv outside the repository (the machine's PyTorch through
  ``--system-site-packages``), lists the examples and trains `example:pytorch` locally;
* on a node of its own (like test_chart_in_cluster.py), with the release's OCI archives loaded into the
  registry layout containerd pulls from: `helm repo add` of the server + `helm install` with default
  values runs the TensorFlow example from the release's examples/ to Succeeded; after `helm uninstall`,
  `kubectl apply --server-side -f` of the release's CRDs and install manifest, as the README says, runs
  it again, every pod on images pinned by the digests of the archives. After each install a PyTorchJob
  and an MPIJob show that the init containers the hooks give tenants' pods (the PyTorch worker's DNS
  wait, the MPI launcher's kubectl-delivery) run the release's trainop-init by its digest.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlaneError, default_bin_dir
from trainop_stack import KINDS, Namespace, job

from tests.e2e_node.builds import prepare, running
from tests.e2e_node.realnode import NodeControlPlane
from trainop.examples import example

REPO = Path(__file__).resolve().parents[2]
RELEASE_SCRIPT = REPO / "hack" / "release.sh"
OCI_ARCHIVE_TOOL = REPO / "hack" / "lib" / "oci_archive.py"
sys.path.insert(0, str(REPO / "hack" / "lib"))
import versions  # noqa: E402

EXAMPLE = "tensorflow"  # a light one: its pods only meet through TF_CONFIG
RELEASE, NAMESPACE = "trainop", "trainop-system"
# The release's images that run in jobs' pods, not as servers.
INIT_REPO, TENSORBOARD_REPO = "docker.io/library/trainop-init", "docker.io/library/trainop-tensorboard"


@dataclass(frozen=True)
class Served:
    dist: Path
    version: str
    url: str  # where dist/ is served, ending in /
    allowed_signers: Path  # the public half of the key the release was signed with, as a user has it

    @property
    def folder(self) -> Path:
        return self.dist / self.version

    def at(self, name: str) -> str:
        return f"{self.url}{self.version}/{name}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    dist = tmp_path_factory.mktemp("dist")
    keys = tmp_path_factory.mktemp("signing")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "release")], check=True)
    allowed_signers = keys / "allowed_signers"
    public = (keys / "release.pub").read_text().strip()
    allowed_signers.write_text(f'release@trainop namespaces="trainop-release" {public}\n')
    version = versions.current()
    env = {**os.environ, "TRAINOP_RELEASE_SIGNING_KEY": str(keys / "release")}
    res = subprocess.run(["bash", str(RELEASE_SCRIPT), version, "--dist", str(dist)],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=1800)  # fmt: skip
    if res.returncode != 0:
        pytest.fail(
            f"hack/release.sh {version} exited {res.returncode}:\n{res.stderr[-6000:]}", pytrace=False
        )
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(dist))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="dist", daemon=True)
    thread.start()
    try:
        yield Served(dist, version, f"http://127.0.0.1:{server.server_address[1]}/", allowed_signers)
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------------------------- pip


@pytest.fixture(scope="module")
def venv(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv outside the repository with the release's wheel, installed from the server."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(root / "venv")], check=True)
    # --force-reinstall --no-deps: the machine's Python may hold a trainop of the same version (an
    # editable install), which pip would otherwise take as already satisfied; the dependencies are the
    # machine's (no index is asked).
    wheel = served.at(f"trainop-{served.version}-py3-none-any.whl")
    subprocess.run(
        [str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "--no-index", "--force-reinstall",
         "--no-deps", "-q", wheel],
        check=True, cwd=root, env=outside_env(),
    )  # fmt: skip
    return root / "venv"


def outside_env() -> dict[str, str]:
    """The environment of a user with no clone: nothing points into this repository."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH", "VIRTUAL_ENV")}


def in_venv(venv: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / argv[0]), *argv[1:]], capture_output=True, text=True,
                          cwd=venv.parent, env=outside_env(), timeout=timeout)  # fmt: skip


def test_the_wheel_from_the_release_is_the_trainop_the_new_venv_imports(venv: Path, served: Served) -> None:
    res = in_venv(
        venv,
        "python",
        "-c",
        "import json, trainop; print(json.dumps([trainop.__file__, trainop.__version__]))",
    )
    path, version = json.loads(res.stdout)
    assert Path(path).is_relative_to(venv / "lib"), path
    assert version == served.version
    assert in_venv(venv, "trainop", "--version").stdout.strip() == f"trainop {served.version}"


def test_the_served_release_verifies_against_the_signers_public_key(served: Served, tmp_path: Path) -> None:
    """What docs/release.md tells a user to run, on the files as downloaded."""
    for name in ("SHA256SUMS", "SHA256SUMS.sig", "trainop.yaml"):
        with urllib.request.urlopen(served.at(name), timeout=60) as response:
            (tmp_path / name).write_bytes(response.read())
    verify = subprocess.run(
        ["ssh-keygen", "-Y", "verify", "-f", str(served.allowed_signers), "-I", "release@trainop",
         "-n", "trainop-release", "-s", "SHA256SUMS.sig"],
        input=(tmp_path / "SHA256SUMS").read_text(), capture_output=True, text=True, cwd=tmp_path,
        check=False,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    check = subprocess.run(["sha256sum", "--ignore-missing", "-c", "SHA256SUMS"], capture_output=True,
                           text=True, cwd=tmp_path, check=False)  # fmt: skip
    assert check.returncode == 0 and "trainop.yaml: OK" in check.stdout, check.stdout + check.stderr


def test_the_served_build_context_of_the_examples_images_is_training_images_as_committed(
    served: Served,
) -> None:
    with urllib.request.urlopen(served.at("training-images.tar.gz"), timeout=60) as response:
        data = response.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        shipped = {
            m.name.removeprefix("./"): archive.extractfile(m).read()  # type: ignore[union-attr]
            for m in archive.getmembers()
            if m.isfile()
        }
    tracked = subprocess.run(["git", "ls-files", "training-images"], capture_output=True, text=True,
                             cwd=REPO, check=True).stdout.split()  # fmt: skip
    assert shipped == {name.removeprefix("training-images/"): (REPO / name).read_bytes() for name in tracked}


def test_the_installed_wheel_lists_the_examples_with_no_clone(venv: Path) -> None:
    res = in_venv(venv, "trainop", "examples")
    assert res.returncode == 0, res.stderr
    listed = {line.split()[0] for line in res.stdout.splitlines()[1:]}
    assert {"pytorch", "tensorflow", "xgboost"} <= listed, res.stdout


def test_the_installed_wheel_trains_the_pytorch_example_here(
    venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = in_venv(venv, "trainop", "run", "example:pytorch", "--timeout", "600", timeout=660)
    assert res.returncode == 0, f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    name = example("pytorch").job["metadata"]["name"]
    output = (res.stdout + res.stderr).splitlines()
    (verdict,) = [line for line in output if line.startswith(f"PyTorchJob {name}: ")]
    assert "job Succeeded" in verdict, verdict
    with capsys.disabled():
        print(f"\n[release wheel] trainop run example:pytorch: {verdict}")


# --------------------------------------------------------------------------------------------- node


@pytest.fixture(scope="module")
def node(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeControlPlane]:
    work = tmp_path_factory.mktemp("release_node")
    prepare(work, training_images=True)  # the example's image
    cluster = NodeControlPlane(default_bin_dir(), work / "cluster")
    with running(cluster, cluster):
        yield cluster


@pytest.fixture(scope="module")
def images(node: NodeControlPlane, served: Served) -> dict[str, str]:
    """The release's archives in the layout the node pulls from: their reference -> digest."""
    loaded = {}
    for archive in sorted((served.folder / "images").glob("*.oci.tar")):
        done = subprocess.run([sys.executable, str(OCI_ARCHIVE_TOOL), "load", "--layout", str(node.layout),
                               str(archive)], capture_output=True, text=True, check=True)  # fmt: skip
        ref, digest = done.stdout.split()
        loaded[ref] = digest
    # The kubelet pulls only what containerd lacks, and reports a pod's imageID as any repository digest
    # containerd holds for the same image config: every image of these repositories goes (an earlier
    # build's `src-` tag of the same tree has the same config under another digest), whatever its name.
    repos = tuple(ref.rsplit(":", 1)[0] for ref in loaded)
    held = node.ctr("images", "ls", "-q").stdout.split()
    stale = [
        ref for ref in held if ref.startswith(tuple(f"{r}:" for r in repos) + tuple(f"{r}@" for r in repos))
    ]
    if stale:
        node.ctr("images", "rm", "--sync", *stale, timeout=300.0)
    return loaded


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("helm")
    return {
        "HELM_REPOSITORY_CONFIG": str(home / "repositories.yaml"),
        "HELM_REPOSITORY_CACHE": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_DATA_HOME": str(home / "data"),
    }


def helm(node: NodeControlPlane, env: dict[str, str], *args: str, timeout: float = 300) -> str:
    argv = [str(default_bin_dir() / "helm"), "--kubeconfig", str(node.kubeconfig), *args]
    res = subprocess.run(argv, capture_output=True, text=True, env={**node.env, **env}, timeout=timeout)
    if res.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {res.returncode}:\n{res.stderr}{res.stdout}")
    return res.stdout


@pytest.fixture
def ns(node: NodeControlPlane) -> Iterator[Namespace]:
    name = f"release-{uuid.uuid4().hex[:8]}"
    node.create_namespace(name)
    yield Namespace(node, name)
    node.kubectl("delete", "namespace", name, "--wait=false", check=False)


@contextlib.contextmanager
def pods_listed_on_failure(node: NodeControlPlane) -> Iterator[None]:
    """A wait that fails says where every pod of the cluster stood."""
    try:
        yield
    except (AssertionError, ControlPlaneError) as e:
        pods = node.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        raise AssertionError(f"{e}\n{pods}") from None


def run_the_example(node: NodeControlPlane, ns: Namespace, served: Served) -> dict[str, Any]:
    """`kubectl apply -f` of the release's example over HTTP, to Succeeded; returns the job."""
    name = example(EXAMPLE).job["metadata"]["name"]
    ns.kubectl("apply", "-f", served.at(f"examples/{EXAMPLE}.yaml"))
    with pods_listed_on_failure(node):
        ns.wait_for(f"tfjobs/{name}", "Succeeded", timeout=300)
    return ns.get(f"tfjobs/{name}")


def pinned(images: dict[str, str]) -> set[str]:
    """``repository@digest`` of the release's images that run as servers (TensorBoard and trainop-init
    run in jobs' pods)."""
    in_jobs = (f"{INIT_REPO}:", f"{TENSORBOARD_REPO}:")
    return {f"{ref.rsplit(':', 1)[0]}@{d}" for ref, d in images.items() if not ref.startswith(in_jobs)}


def init_digest(images: dict[str, str]) -> str:
    (digest,) = [d for ref, d in images.items() if ref.startswith(f"{INIT_REPO}:")]
    return digest


def tiny_replica(kind: str, image: str, script: str) -> dict[str, Any]:
    container = {"name": KINDS[kind]["container"], "image": image, "command": ["sh", "-c", script]}
    spec = {"terminationGracePeriodSeconds": 1, "containers": [container]}
    return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": spec}}


def completed_init_container(ns: Namespace, pod: str) -> dict[str, Any]:
    """The pod's one init container's spec and status, once it exited 0."""
    found: dict[str, Any] = {}

    def done() -> bool:
        obj = ns.get(f"pod/{pod}")
        (status,) = obj["status"].get("initContainerStatuses") or [{}]
        if (status.get("state", {}).get("terminated") or {}).get("exitCode") != 0:
            return False
        (found["spec"],), found["status"] = obj["spec"]["initContainers"], status
        return True

    ns.wait_until(f"the init container of {pod} to complete", done, timeout=180, interval=1.0)
    return found


def init_containers_run(node: NodeControlPlane, ns: Namespace, image: str) -> dict[str, dict[str, Any]]:
    """A PyTorchJob (Master + Worker) and an MPIJob (Launcher + Worker) whose containers run ``image``: the
    PyTorch worker's init container (waits for the master's name) and the MPI launcher's (delivers kubectl,
    waits for the worker), once each completed. The master and the MPI worker stay up until the job goes."""
    ns.create(job("PyTorchJob", "init-pytorch", {
        "Master": tiny_replica("PyTorchJob", image, "sleep 600"),
        "Worker": tiny_replica("PyTorchJob", image, "true"),
    }))  # fmt: skip
    ns.create(job("MPIJob", "init-mpi", {
        "Launcher": tiny_replica("MPIJob", image, "true"),
        "Worker": tiny_replica("MPIJob", image, "sleep 600"),
    }, slotsPerWorker=1))  # fmt: skip
    with pods_listed_on_failure(node):
        return {
            "pytorch": completed_init_container(ns, "init-pytorch-worker-0"),
            "mpi": completed_init_container(ns, "init-mpi-launcher"),
        }


def assert_init_image_pinned(runs: dict[str, dict[str, Any]], image: str, digest: str) -> None:
    """Each init container names ``image`` and ran the bytes of ``digest`` (containerd may report the
    digest under another repository holding the same image, e.g. the node tier's toolbox)."""
    for kind, run in runs.items():
        assert run["spec"]["image"] == image, kind
        assert run["status"]["imageID"].rpartition("@")[2] == digest, (kind, run["status"]["imageID"])


def server_images(node: NodeControlPlane) -> dict[str, set[str]]:
    """Every container image of the install's pods (trainop-system and metacontroller), by pod prefix."""
    out: dict[str, set[str]] = {}
    for namespace in (NAMESPACE, "metacontroller"):
        pods = json.loads(node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
        for pod in pods:
            statuses = [*pod["status"].get("initContainerStatuses", []), *pod["status"]["containerStatuses"]]
            out.setdefault(namespace, set()).update(s["imageID"] for s in statuses)
    return out


def test_helm_repo_add_of_the_served_dist_and_helm_install_with_default_values_run_the_example(
    node: NodeControlPlane, served: Served, images: dict[str, str], helm_home: dict[str, str],
    ns: Namespace, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    helm(node, helm_home, "repo", "add", "trainop", served.url)
    found = yaml.safe_load(
        helm(node, helm_home, "search", "repo", "trainop/trainop", "--versions", "-o", "yaml")
    )
    assert [(c["name"], c["version"]) for c in found] == [("trainop/trainop", served.version)]
    with pods_listed_on_failure(node):
        helm(node, helm_home, "install", RELEASE, "trainop/trainop", "--version", served.version,
             "-n", NAMESPACE, "--create-namespace", "--wait", "--timeout=300s", timeout=360)  # fmt: skip
    job = run_the_example(node, ns, served)
    with capsys.disabled():
        print(f"\n[release helm] {EXAMPLE} {job['status']['conditions'][-1]['type']} from {served.url}")
    # The chart names the images by tag; what runs is what the release's archives hold.
    assert server_images(node) == {NAMESPACE: pinned(images)}
    digest = init_digest(images)
    values_image = f"{INIT_REPO}:{served.version}@{digest}"
    assert_init_image_pinned(init_containers_run(node, ns, values_image), values_image, digest)
    node.kubectl("delete", "kubeflow", "--all", "-A", "--wait=true", timeout=180)
    helm(node, helm_home, "uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=120s")
    # A cluster as before the install: Helm keeps the CRDs of crds/, the manifest brings them again.
    node.kubectl(
        "delete", "-f", served.at("trainop-crds.yaml"), "--ignore-not-found", "--wait=true", timeout=180
    )


def test_kubectl_apply_of_the_served_manifest_runs_the_example_on_images_pinned_by_digest(
    node: NodeControlPlane, served: Served, images: dict[str, str], ns: Namespace,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    applied = node.kubectl(
        "apply", "--server-side", "-o", "name", "-f", served.at("trainop-crds.yaml"), timeout=120
    ).stdout.split()
    node.wait_established(applied)
    node.kubectl("apply", "--server-side", "-f", served.at("trainop.yaml"), timeout=180)
    with pods_listed_on_failure(node):
        node.kubectl("wait", "--for=condition=Available", "deployment", "--all", "-n", NAMESPACE,
                     "--timeout=300s", timeout=330)  # fmt: skip
        node.kubectl(
            "rollout", "status", "statefulset", "-n", "metacontroller", "--timeout=300s", timeout=330
        )
    job = run_the_example(node, ns, served)
    with capsys.disabled():
        print(f"\n[release manifest] {EXAMPLE} {job['status']['conditions'][-1]['type']} from {served.url}")
    trainop = {i for i in pinned(images) if "/metacontroller@" not in i}
    assert server_images(node) == {NAMESPACE: trainop, "metacontroller": pinned(images) - trainop}
    digest = init_digest(images)
    manifest_image = f"{INIT_REPO}@{digest}"
    assert_init_image_pinned(init_containers_run(node, ns, manifest_image), manifest_image, digest)
