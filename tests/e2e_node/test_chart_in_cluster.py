"""The chart in-cluster on the real node: `helm install` with default values, every server a pod.

The project's image (hack/build-image.sh, from this work tree) and Metacontroller's (hack/build-node.sh,
from the vendored source) are served to the node under the chart's default names (incluster.py). After
`helm install trainop charts/trainop -n trainop-system --create-namespace --wait`, exactly as the README
says, the apiserver calls the webhooks through their Service with the certificate the webhook server
made itself, Metacontroller (a pod of the release) calls the hooks through theirs, and the TensorFlow
example trains. Nothing of the trainop stack runs on the host in this module: it starts a node of its own
(before the session node of the other modules, conftest.py orders it first).

The pod network's bridge plugin does not enforce NetworkPolicy; what is proven here is that the chart's
policies select the pods the release really runs. test_networkpolicy.py enforces them (kube-router's
policy controller) and proves who may reach which port.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from chart import packaged_chart
from controlplane import ControlPlaneError, default_bin_dir
from trainop_stack import Namespace

from tests.builders import job
from tests.e2e_node.builds import prepare, running
from tests.e2e_node.incluster import ChartImages, InClusterRelease, load_chart_images
from tests.e2e_node.realnode import NODE_NAME, NodeControlPlane
from tests.image.conftest import PACKAGES, work_tree_hashes
from tests.image.test_image import INSTALLED_HASHES
from trainop.examples import example

RELEASE, NAMESPACE = "trainop", "trainop-system"
SERVERS = ("hooks", "webhooks")
COMPONENTS = (*SERVERS, "metacontroller")
REPLICAS = {"hooks": 2, "webhooks": 2, "metacontroller": 1}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeControlPlane]:
    work = tmp_path_factory.mktemp("chart_in_cluster")
    prepare(work, training_images=True)
    cluster = NodeControlPlane(default_bin_dir(), work / "cluster")
    with running(cluster, cluster):
        yield cluster


@pytest.fixture(scope="module")
def chart(node: NodeControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packaged_chart(tmp_path_factory.mktemp("chart"))


@pytest.fixture(scope="module")
def images(node: NodeControlPlane, chart: Path) -> tuple[ChartImages, dict[str, str]]:
    """The chart's images, and this work tree's sources as they were when its image was named."""
    sources = work_tree_hashes()
    return load_chart_images(node, chart), sources


@pytest.fixture(scope="module")
def release(
    node: NodeControlPlane, chart: Path, images: tuple[ChartImages, dict[str, str]]
) -> Iterator[InClusterRelease]:
    rel = InClusterRelease(node, chart, RELEASE, NAMESPACE)
    try:
        rel.install()
    except ControlPlaneError as e:
        pods = node.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        events = node.kubectl(
            "get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp", check=False
        ).stdout
        pytest.fail(f"{e}\n{pods}\n{events[-6000:]}", pytrace=False)
    yield rel
    if rel.helm("status", RELEASE, "-n", NAMESPACE, check=False).returncode == 0:
        node.kubectl("delete", "kubeflow", "--all", "-A", "--wait=true", check=False, timeout=180)
        rel.uninstall()


@pytest.fixture
def ns(node: NodeControlPlane) -> Iterator[Namespace]:
    name = f"chart-{uuid.uuid4().hex[:8]}"
    node.create_namespace(name)
    yield Namespace(node, name)
    node.kubectl("delete", "namespace", name, "--wait=false", check=False)


def container_pid(node: NodeControlPlane, pod: Mapping[str, Any]) -> int:
    """Host PID of the pod's (only) container, from containerd's task list."""
    (status,) = pod["status"]["containerStatuses"]
    container_id = status["containerID"].removeprefix("containerd://")
    for line in node.ctr("tasks", "ls").stdout.splitlines()[1:]:
        task, pid, state = line.split()[:3]
        if task == container_id and state == "RUNNING":
            return int(pid)
    raise AssertionError(f"no running task for {pod['metadata']['name']} ({container_id})")


def root_mount_options(pid: int) -> set[str]:
    """Mount options of the process's root filesystem, as its own mount namespace sees it."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return set(fields[5].split(","))
    raise AssertionError(f"process {pid} has no root mount")


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) against labels."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def peer_admits(
    peer: Mapping[str, Any], policy_ns: str, pod: Mapping[str, Any], ns_labels: dict[str, str]
) -> bool:
    """Whether a NetworkPolicy ``from`` peer selects ``pod`` (ipBlock peers select no pod by identity)."""
    if "ipBlock" in peer:
        return False
    meta = pod["metadata"]
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"], ns_labels):
            return False
    elif meta["namespace"] != policy_ns:
        return False
    return "podSelector" not in peer or selector_matches(peer["podSelector"], meta.get("labels") or {})


# --------------------------------------------------------------------------------------------- install


def test_default_install_runs_every_server_ready_on_the_real_node(
    release: InClusterRelease, node: NodeControlPlane
) -> None:
    expected = []
    for component in COMPONENTS:
        pods = release.component_pods(component)
        assert len(pods) == REPLICAS[component], [p["metadata"]["name"] for p in pods]
        for pod in pods:
            assert pod["spec"]["nodeName"] == NODE_NAME
            assert all(s["ready"] for s in pod["status"]["containerStatuses"]), pod["status"]
            # Native sidecars (the webhooks' cert-rotator) run beside the containers for the pod's life.
            sidecars = [
                c for c in pod["spec"].get("initContainers") or [] if c.get("restartPolicy") == "Always"
            ]
            expected += [
                f"{pod['metadata']['name']}/{c['name']}" for c in [*sidecars, *pod["spec"]["containers"]]
            ]
    # Real containers in containerd, one per container of each pod: nothing of the release runs on the host.
    assert node.running_containers(NAMESPACE) == sorted(expected)


def test_the_servers_run_the_image_built_from_this_work_tree(
    release: InClusterRelease, images: tuple[ChartImages, dict[str, str]]
) -> None:
    chart_images, sources = images
    for component in SERVERS:
        for pod in release.component_pods(component):
            (status,) = pod["status"]["containerStatuses"]
            assert status["image"] == chart_images.project.reference
            assert status["imageID"] == f"{chart_images.project.repository}@{chart_images.project.digest}"
            script = INSTALLED_HASHES % (PACKAGES,)
            out = release.kubectl("exec", "-n", NAMESPACE, pod["metadata"]["name"], "--",
                                  "python", "-I", "-c", script).stdout  # fmt: skip
            assert json.loads(out) == sources, f"{pod['metadata']['name']} runs other code than the work tree"


def test_metacontroller_runs_the_image_of_the_binary_built_from_the_vendored_source(
    release: InClusterRelease, node: NodeControlPlane, images: tuple[ChartImages, dict[str, str]]
) -> None:
    chart_images, _ = images
    (pod,) = release.component_pods("metacontroller")
    (status,) = pod["status"]["containerStatuses"]
    assert status["image"] == chart_images.metacontroller.reference
    assert (
        status["imageID"] == f"{chart_images.metacontroller.repository}@{chart_images.metacontroller.digest}"
    )
    running = Path(f"/proc/{container_pid(node, pod)}/exe").read_bytes()
    built = (default_bin_dir() / "metacontroller").read_bytes()
    assert hashlib.sha256(running).hexdigest() == hashlib.sha256(built).hexdigest()


@pytest.mark.parametrize("component", COMPONENTS)
def test_every_server_runs_as_uid_65532_on_a_read_only_root_filesystem(
    release: InClusterRelease, node: NodeControlPlane, component: str
) -> None:
    for pod in release.component_pods(component):
        pid = container_pid(node, pod)
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        assert fields["Uid"].split() == ["65532"] * 4, fields["Uid"]
        assert fields["Gid"].split()[0] == "65532", fields["Gid"]
        assert fields["CapEff"].strip() == "0000000000000000", fields["CapEff"]
        assert fields["NoNewPrivs"].strip() == "1"
        assert "ro" in root_mount_options(pid)


# --------------------------------------------------------------------------------------------- webhooks


def webhook_ca(node: NodeControlPlane) -> bytes:
    secret = node.get_json(f"secret/{RELEASE}-webhook-cert", "-n", NAMESPACE)
    return base64.b64decode(secret["data"]["ca.crt"])


def test_the_webhook_configurations_call_the_service_with_the_ca_the_server_made(
    node: NodeControlPlane,
) -> None:
    ca = webhook_ca(node)
    for kind, op in (
        ("mutatingwebhookconfiguration", "mutate"),
        ("validatingwebhookconfiguration", "validate"),
    ):
        for hook in node.get_json(f"{kind}/{RELEASE}-{op}")["webhooks"]:
            client = hook["clientConfig"]
            assert "url" not in client
            assert client["service"]["name"] == f"{RELEASE}-webhooks"
            assert client["service"]["namespace"] == NAMESPACE
            assert base64.b64decode(client["caBundle"]) == ca


def test_the_webhook_service_serves_a_certificate_valid_for_its_dns_name(
    release: InClusterRelease, node: NodeControlPlane
) -> None:
    # What the apiserver does: connect to the Service's ClusterIP (kube-proxy's DNAT to a pod), verify
    # against caBundle with the name <service>.<namespace>.svc.
    service = node.get_json(f"service/{RELEASE}-webhooks", "-n", NAMESPACE)
    context = ssl.create_default_context(cadata=webhook_ca(node).decode())
    host = f"{RELEASE}-webhooks.{NAMESPACE}.svc"
    with (
        socket.create_connection((service["spec"]["clusterIP"], 443), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        reply = b""
        while chunk := tls.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]


def test_the_apiserver_rejects_a_bad_job_through_the_in_cluster_webhooks(
    release: InClusterRelease, ns: Namespace
) -> None:
    bad = job("PyTorchJob", name="two-masters", namespace=ns.name, Master=2)
    res = ns.create(bad, check=False)
    assert res.returncode != 0
    assert "Master must have exactly 1 replica" in res.stderr, res.stderr
    validated = [r for r in release.log_records("webhooks") if r.get("path") == "/validate"]
    assert {"namespace": ns.name, "name": "two-masters", "allowed": False} in [
        {k: r.get(k) for k in ("namespace", "name", "allowed")} for r in validated
    ], validated


def test_the_webhook_certificate_survives_a_webhook_pod_restart(
    release: InClusterRelease, node: NodeControlPlane, ns: Namespace
) -> None:
    ca = webhook_ca(node)
    before = {p["metadata"]["name"] for p in release.component_pods("webhooks")}
    node.kubectl("delete", "pods", "-n", NAMESPACE, *sorted(before), "--wait=true", timeout=120)
    node.kubectl("rollout", "status", f"deployment/{RELEASE}-webhooks", "-n", NAMESPACE, "--timeout=120s",
                 timeout=150)  # fmt: skip
    after = {p["metadata"]["name"] for p in release.component_pods("webhooks")}
    assert not before & after
    assert webhook_ca(node) == ca
    # Ready pods are not yet reachable through the Service until kube-proxy has their endpoints: until
    # then the apiserver's call is refused, which is the restart's outage, not a certificate problem.
    answers: list[str] = []

    def denied() -> bool:
        bad = job("PyTorchJob", name="after-restart", namespace=ns.name, Master=2)
        answers.append(ns.create(bad, check=False).stderr)
        return "failed calling webhook" not in answers[-1]

    node.wait_until("the restarted webhooks answer through their Service", denied, timeout=60)
    assert "Master must have exactly 1 replica" in answers[-1], answers[-1]


# --------------------------------------------------------------------------------------------- hooks


def test_metacontroller_calls_the_hooks_service_and_the_tensorflow_example_trains(
    release: InClusterRelease, node: NodeControlPlane, ns: Namespace, capsys: pytest.CaptureFixture[str]
) -> None:
    selector = f"app.kubernetes.io/instance={RELEASE}"
    controllers: list[dict[str, Any]] = node.get_json("compositecontrollers", "-l", selector)["items"]
    assert len(controllers) == 7
    # The Service by its DNS name, resolved by CoreDNS from Metacontroller's pod.
    assert {cc["spec"]["hooks"]["sync"]["webhook"]["url"] for cc in controllers} == {
        f"http://{RELEASE}-hooks.{NAMESPACE}/sync"
    }
    ns.apply(example("tensorflow").document)  # `trainop examples show tensorflow | kubectl apply -f -`
    ns.wait_for("tfjobs/tf-rendezvous", "Succeeded", timeout=300)
    logs = ns.kubectl("logs", "tf-rendezvous-worker-0").stdout
    match = re.search(r"worker:0 heard from ps:0, worker:1", logs)
    assert match, logs
    with capsys.disabled():
        print(f"\n[chart in-cluster] kubectl logs tf-rendezvous-worker-0: {match.group(0)}")
    synced = [r for r in release.log_records("hooks") if r.get("namespace") == ns.name]
    assert synced and {(r["path"], r["kind"], r["name"]) for r in synced} == {
        ("/customize", "TFJob", "tf-rendezvous"),
        ("/sync", "TFJob", "tf-rendezvous"),
    }


def test_the_hooks_network_policy_admits_the_bundled_metacontroller_and_no_other_pod(
    release: InClusterRelease, node: NodeControlPlane
) -> None:
    policy = node.get_json(f"networkpolicy/{RELEASE}-hooks", "-n", NAMESPACE)["spec"]
    for pod in release.component_pods("hooks"):
        assert selector_matches(policy["podSelector"], pod["metadata"]["labels"])
    (rule,) = [r for r in policy["ingress"] if any(p["port"] == "http" for p in r.get("ports", []))]
    ns_labels = node.get_json(f"namespace/{NAMESPACE}")["metadata"]["labels"]

    def admitted(pod: Mapping[str, Any]) -> bool:
        return any(peer_admits(peer, NAMESPACE, pod, ns_labels) for peer in rule["from"])

    (metacontroller,) = release.component_pods("metacontroller")
    assert admitted(metacontroller), metacontroller["metadata"]["labels"]
    for other in [*release.component_pods("webhooks"), *release.component_pods("hooks")]:
        assert not admitted(other), other["metadata"]["name"]


# --------------------------------------------------------------------------------------------- web UI
# `helm upgrade` of the same release with the UI on, in proxy mode, as docs/ui.md says to open it on a
# cluster; reached through its Service's ClusterIP from the node, as a proxy in the pod network would.

UI = f"{RELEASE}-ui"
UI_SA = f"system:serviceaccount:{NAMESPACE}:{UI}"
PROXY_LABELS = {"app": "ui-proxy"}
# The Secret the proxy and the UI share (ui.auth.proxySecret), and the one group the UI impersonates.
PROXY_SECRET = "node-proxy-secret"
UI_GROUP = "ui-readers"


@pytest.fixture(scope="module")
def ui_release(release: InClusterRelease, node: NodeControlPlane) -> InClusterRelease:
    node.kubectl(
        "create", "secret", "generic", "ui-proxy", "-n", NAMESPACE, f"--from-literal=secret={PROXY_SECRET}"
    )
    release.upgrade([
        "ui.enabled=true",
        "ui.auth.mode=proxy",
        "ui.auth.groupsHeader=X-Forwarded-Groups",
        f"ui.auth.impersonateGroups[0]={UI_GROUP}",
        "ui.auth.proxySecret.name=ui-proxy",
        "ui.networkPolicy.from[0].podSelector.matchLabels.app=ui-proxy",
    ])  # fmt: skip
    return release


def ui_get(node: NodeControlPlane, path: str, user: str, groups: str = "") -> tuple[int, str, str]:
    """Status, content type and body of a GET through the UI's Service, with the proxy's headers."""
    service = node.get_json(f"service/{UI}", "-n", NAMESPACE)
    headers = {
        "X-Trainop-Proxy-Secret": PROXY_SECRET,
        "X-Forwarded-User": user,
        **({"X-Forwarded-Groups": groups} if groups else {}),
    }
    request = urllib.request.Request(f"http://{service['spec']['clusterIP']}:80{path}", headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as answer:
            if answer.headers.get_content_type() == "text/event-stream":
                return (
                    answer.status,
                    "text/event-stream",
                    answer.readline().decode() + answer.readline().decode(),
                )
            return answer.status, answer.headers.get_content_type(), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get_content_type(), exc.read().decode()


def suspended_job(ns: Namespace, name: str) -> None:
    obj = job("PyTorchJob", name=name, namespace=ns.name, Master=1)
    obj["spec"]["runPolicy"] = {"suspend": True}  # listed, never scheduled: no image is pulled
    ns.create(obj)


def test_a_proxy_user_sees_through_the_ui_service_the_job_their_view_role_shows(
    ui_release: InClusterRelease, node: NodeControlPlane, ns: Namespace
) -> None:
    user = f"viewer-{uuid.uuid4().hex[:6]}"
    ns.kubectl("create", "rolebinding", "ui-viewer", "--clusterrole=view", f"--user={user}")
    suspended_job(ns, "listed")
    node.wait_until(
        "the job in the viewer's list",
        lambda: "listed" in ui_get(node, f"/?namespace={ns.name}", user)[2],
        timeout=60,
    )
    status, _, page = ui_get(node, f"/job/{ns.name}/PyTorchJob/listed", user)
    assert status == 200 and "listed" in page
    stranger_status, _, stranger_list = ui_get(node, f"/?namespace={ns.name}", f"stranger-{user}")
    assert stranger_status == 200 and "listed" not in stranger_list
    assert ui_get(node, f"/job/{ns.name}/PyTorchJob/listed", f"stranger-{user}")[0] in (403, 404)


def test_a_ui_user_granted_access_through_their_second_group_sees_the_job(
    ui_release: InClusterRelease, node: NodeControlPlane, ns: Namespace
) -> None:
    group = UI_GROUP
    ns.kubectl("create", "rolebinding", "ui-group", "--clusterrole=view", f"--group={group}")
    suspended_job(ns, "by-group")
    node.wait_until(
        "the job in the list of the group's member",
        lambda: "by-group" in ui_get(node, f"/?namespace={ns.name}", "carol", f"unrelated,{group}")[2],
        timeout=60,
    )
    assert ui_get(node, f"/job/{ns.name}/PyTorchJob/by-group", "carol", f"unrelated,{group}")[0] == 200
    assert ui_get(node, f"/job/{ns.name}/PyTorchJob/by-group", "carol", "unrelated")[0] in (403, 404)


def test_a_jobs_page_in_the_ui_shows_its_pods_log_from_the_kubelet(
    ui_release: InClusterRelease, node: NodeControlPlane, ns: Namespace
) -> None:
    user = f"viewer-{uuid.uuid4().hex[:6]}"
    ns.kubectl("create", "rolebinding", "ui-viewer", "--clusterrole=view", f"--user={user}")
    obj = job("PyTorchJob", name="logged", namespace=ns.name, Master=1)
    (container,) = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    image = example("pytorch").job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    container.update(image=image[0]["image"], command=["python3", "-c", "print('hello from the kubelet')"])
    ns.create(obj)
    ns.wait_for("pytorchjobs/logged", "Succeeded", timeout=180)
    status, _, page = ui_get(node, f"/job/{ns.name}/PyTorchJob/logged", user)
    assert status == 200
    assert "[master-0] hello from the kubelet" in page, page[-3000:]


def test_the_ui_streams_events_through_its_service(
    ui_release: InClusterRelease, node: NodeControlPlane
) -> None:
    status, kind, first = ui_get(node, "/stream/list", "anyone")
    assert (status, kind) == (200, "text/event-stream")
    assert first.startswith("retry: 2000")


def test_the_ui_pod_is_gunicorn_with_one_worker_as_uid_65532_on_a_read_only_root(
    ui_release: InClusterRelease, node: NodeControlPlane
) -> None:
    (pod,) = ui_release.component_pods("ui")
    assert pod["spec"]["nodeName"] == NODE_NAME
    pid = container_pid(node, pod)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"ui" in argv and b"--cluster" in argv and b"--auth=proxy" in argv
    workers = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(workers) == 1, workers
    log = ui_release.logs("ui")
    # (the log names the worker's pid in the pod's own pid namespace, not the node's)
    assert "Starting gunicorn" in log and log.count("Booting worker with pid") == 1, log
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    assert fields["Uid"].split() == ["65532"] * 4, fields["Uid"]
    assert fields["CapEff"].strip() == "0000000000000000", fields["CapEff"]
    assert "ro" in root_mount_options(pid)


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("list", "pytorchjobs.kubeflow.org", True),
        ("watch", "tfjobs.kubeflow.org", True),
        ("impersonate", "users", True),
        ("impersonate", f"groups/{UI_GROUP}", True),
        ("impersonate", "groups/system:masters", False),
        ("impersonate", "groups", False),
        ("delete", "pytorchjobs.kubeflow.org", False),
        ("patch", "pytorchjobs.kubeflow.org", False),
        ("list", "pods", False),
        ("get", "secrets", False),
        ("create", "tokenreviews.authentication.k8s.io", False),
    ],
)
def test_the_ui_service_account_may_watch_jobs_and_impersonate_users_and_the_named_group_only(
    ui_release: InClusterRelease, node: NodeControlPlane, verb: str, resource: str, allowed: bool
) -> None:
    answer = node.kubectl("auth", "can-i", verb, resource, "-A", f"--as={UI_SA}", check=False).stdout.strip()
    assert answer == ("yes" if allowed else "no")


def test_the_ui_network_policy_admits_only_the_configured_proxy_to_the_ui_pod(
    ui_release: InClusterRelease, node: NodeControlPlane
) -> None:
    policy = node.get_json(f"networkpolicy/{UI}", "-n", NAMESPACE)["spec"]
    (pod,) = ui_release.component_pods("ui")
    assert selector_matches(policy["podSelector"], pod["metadata"]["labels"])
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert [p["port"] for p in rule["ports"]] == ["http"]
    ns_labels = node.get_json(f"namespace/{NAMESPACE}")["metadata"]["labels"]
    proxy = {"metadata": {"namespace": NAMESPACE, "labels": PROXY_LABELS}}
    assert any(peer_admits(peer, NAMESPACE, proxy, ns_labels) for peer in rule["from"])
    for other in [*ui_release.component_pods("hooks"), *ui_release.component_pods("webhooks")]:
        assert not any(peer_admits(peer, NAMESPACE, other, ns_labels) for peer in rule["from"])


# --------------------------------------------------------------------------------------------- uninstall


def test_uninstall_after_deleting_the_jobs_stops_every_container(
    release: InClusterRelease, node: NodeControlPlane
) -> None:
    node.kubectl("delete", "kubeflow", "--all", "-A", "--wait=true", timeout=180)
    release.uninstall()

    def left() -> list[str]:
        selector = f"app.kubernetes.io/instance={RELEASE}"
        return node.kubectl("get", "all", "-A", "-l", selector, "-o", "name").stdout.split()

    # The pods go once the kubelet has stopped their containers (gunicorn's graceful shutdown).
    node.wait_until("no object of the release", lambda: not left(), timeout=120)
    assert node.running_containers(NAMESPACE) == []
