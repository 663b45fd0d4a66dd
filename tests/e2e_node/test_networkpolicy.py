"""The chart's NetworkPolicies enforced on the real node: who may reach which port, as documented.

The pod network's bridge plugin enforces no NetworkPolicy, so this module runs an enforcer beside it:
kube-router's network policy controller alone (``--run-firewall=true --run-router=false
--run-service-proxy=false``), built from the Go module proxy by hack/build-kube-router.sh. It turns the
policies into iptables rules and ipsets in the FORWARD path that bridged pod traffic takes
(bridge-nf-call-iptables). Why this enforcer: this machine's kernel has nftables without its ``queue``
expression (CONFIG_NFT_QUEUE is not set), which rules out kind's kube-network-policies (it queues packets
to user space through nftables), while iptables with NFQUEUE, ipset and conntrack matching are there,
which is all kube-router needs. Security flaws are reported for kube-router v2.1.0; that is acceptable
for an enforcer that only this test tier runs, on a node whose pod network never leaves the machine, and
that the project never ships.

On a node of its own (like test_chart_in_cluster.py), ``helm install`` with the chart's default values:
hooks, webhooks and the bundled Metacontroller are pods in trainop-system. Probe pods (the project's
image, a TCP connect from inside the pod's network namespace) in three places: a tenant namespace, the
monitoring namespace (the chart's default ``networkPolicy.monitoringNamespace``) and the release
namespace itself. Every probe reaches every port before the enforcer starts (so a refused connection
afterwards is the policy, not a closed port); with the enforcer running:

* the hook port admits no probe, and the real Metacontroller pod still syncs a new job through it;
* the webhook port admits every probe, and the apiserver (on the host, as on most clusters) still calls it;
* the metrics ports of hooks, webhooks and Metacontroller admit the monitoring namespace only.

Traffic from the node itself (kubelet probes, the apiserver here) is always admitted by kube-router,
as by most enforcers; docs/security.md#who-may-reach-which-port says who may reach which port.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from chart import packaged_chart
from controlplane import ControlPlaneError, ManagedProcess, default_bin_dir
from trainop_stack import Namespace

from tests.builders import job
from tests.e2e_node.builds import build_kube_router, prepare, running
from tests.e2e_node.incluster import ChartImages, InClusterRelease, load_chart_images
from tests.e2e_node.realnode import NODE_NAME, SERVICE_CIDR, NodeControlPlane

RELEASE, NAMESPACE = "trainop", "trainop-system"
MONITORING = "monitoring"  # the chart's default networkPolicy.monitoringNamespace
# (component, port name) -> container port, as the chart's Deployments and Metacontroller's args name them.
PORTS = {
    ("hooks", "http"): 8080,
    ("hooks", "metrics"): 8081,
    ("webhooks", "https"): 9443,
    ("webhooks", "metrics"): 8082,
    ("metacontroller", "metrics"): 9999,
}
SOURCES = ("tenant", "monitoring", "release-namespace")
# Who may reach which port with the chart's defaults (docs/security.md, "Who may reach which port").
ALLOWED = {
    ("hooks", "http"): set[str](),  # Metacontroller only: proven by its syncs, not by a probe
    ("hooks", "metrics"): {"monitoring"},
    ("webhooks", "https"): set(SOURCES),
    ("webhooks", "metrics"): {"monitoring"},
    ("metacontroller", "metrics"): {"monitoring"},
}
CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()"


@dataclass(frozen=True)
class Target:
    component: str
    port_name: str
    ip: str
    port: int


Reachability = dict[tuple[str, str, str], bool]  # (source, component, port name) -> connected


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeControlPlane]:
    work = tmp_path_factory.mktemp("networkpolicy")
    prepare(work, training_images=True)
    try:
        build_kube_router(work)
    except ControlPlaneError as e:
        pytest.fail(f"the NetworkPolicy enforcer is unavailable: {e}", pytrace=False)
    cluster = NodeControlPlane(default_bin_dir(), work / "cluster")
    with running(cluster, cluster):
        yield cluster


@pytest.fixture(scope="module")
def images(node: NodeControlPlane, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ChartImages]:
    chart = packaged_chart(tmp_path_factory.mktemp("chart"))
    return chart, load_chart_images(node, chart)


@pytest.fixture(scope="module")
def release(node: NodeControlPlane, images: tuple[Path, ChartImages]) -> InClusterRelease:
    chart, _ = images
    rel = InClusterRelease(node, chart, RELEASE, NAMESPACE)
    try:
        rel.install()
    except ControlPlaneError as e:
        pods = node.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        pytest.fail(f"{e}\n{pods}", pytrace=False)
    return rel


def probe_pod(name: str, namespace: str, image: str) -> dict[str, Any]:
    """A pod that only waits, from whose network namespace `kubectl exec` opens TCP connections."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "probe"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "probe", "image": image, "command": ["sleep", "infinity"]}],
        },
    }


@pytest.fixture(scope="module")
def probes(
    node: NodeControlPlane, release: InClusterRelease, images: tuple[Path, ChartImages]
) -> dict[str, tuple[str, str]]:
    """source -> (namespace, pod) of a Running probe pod."""
    _, chart_images = images
    tenant = f"tenant-{uuid.uuid4().hex[:6]}"
    for namespace in (tenant, MONITORING):
        node.create_namespace(namespace)
    out = {"tenant": (tenant, "probe"), "monitoring": (MONITORING, "probe"),
           "release-namespace": (NAMESPACE, "probe")}  # fmt: skip
    for namespace, pod in out.values():
        node.kubectl(
            "apply", "-f", "-", input=json.dumps(probe_pod(pod, namespace, chart_images.project.reference))
        )
    for namespace, pod in out.values():
        node.kubectl(
            "wait", "--for=condition=Ready", f"pod/{pod}", "-n", namespace, "--timeout=120s", timeout=150
        )
    return out


def targets(release: InClusterRelease) -> list[Target]:
    out = []
    for (component, port_name), port in PORTS.items():
        pod = release.component_pods(component)[0]
        out.append(Target(component, port_name, pod["status"]["podIP"], port))
    return out


def connects(node: NodeControlPlane, source: tuple[str, str], target: Target) -> bool:
    """Whether a TCP connection from the source pod to the target's pod IP and port is established."""
    namespace, pod = source
    res = node.kubectl("exec", "-n", namespace, pod, "--", "python", "-I", "-c", CONNECT, target.ip,
                       str(target.port), check=False, timeout=30)  # fmt: skip
    return res.returncode == 0


def reachability(
    node: NodeControlPlane, probes: dict[str, tuple[str, str]], release: InClusterRelease
) -> Reachability:
    return {
        (source, t.component, t.port_name): connects(node, probes[source], t)
        for source in SOURCES
        for t in targets(release)
    }


def enforced_pods() -> set[str]:
    """Pods for which kube-router has installed its final REJECT (each pod some policy selects)."""
    marker = "rule to REJECT traffic destined for POD name:"
    dump = subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True, check=True)
    return {line.split(marker, 1)[1].split()[0] for line in dump.stdout.splitlines() if marker in line}


@dataclass
class Enforcement:
    before: Reachability
    after: Reachability
    process: ManagedProcess


@pytest.fixture(scope="module")
def enforcement(
    node: NodeControlPlane, release: InClusterRelease, probes: dict[str, tuple[str, str]]
) -> Enforcement:
    before = reachability(node, probes, release)
    argv = [
        default_bin_dir() / "kube-router",
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        f"--kubeconfig={node.kubeconfig}",
        f"--hostname-override={NODE_NAME}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Nothing listening beyond what the test needs: readiness is read from the rules it writes.
        "--health-port=0",
        "--metrics-port=0",
        "--v=1",
    ]
    process = node.start_process("kube-router", argv)
    selected = {
        p["metadata"]["name"]
        for component in ("hooks", "webhooks", "metacontroller")
        for p in release.component_pods(component)
    }
    node.wait_until(
        f"kube-router enforcing the policies of {sorted(selected)}",
        lambda: selected <= enforced_pods(),
        timeout=120,
        interval=1,
        watch=[process],
    )
    return Enforcement(before, reachability(node, probes, release), process)


# --------------------------------------------------------------------------------------------- tests


def test_without_an_enforcer_every_probe_reaches_every_port(enforcement: Enforcement) -> None:
    assert {key for key, ok in enforcement.before.items() if not ok} == set()


def test_a_pod_in_another_namespace_cannot_reach_the_hook_port(enforcement: Enforcement) -> None:
    assert enforcement.after[("tenant", "hooks", "http")] is False


def test_no_other_pod_reaches_the_hook_port_not_even_in_the_release_or_monitoring_namespace(
    enforcement: Enforcement,
) -> None:
    assert enforcement.after[("release-namespace", "hooks", "http")] is False
    assert enforcement.after[("monitoring", "hooks", "http")] is False


def test_metacontroller_syncs_a_new_job_through_the_hook_port(
    node: NodeControlPlane,
    release: InClusterRelease,
    enforcement: Enforcement,
    probes: dict[str, tuple[str, str]],
) -> None:
    namespace, _ = probes["tenant"]
    ns = Namespace(node, namespace)
    ns.create(job("TFJob", name="synced-under-policy", namespace=namespace, Worker=1))
    node.wait_until(
        "Metacontroller's sync of the new job in the hooks' logs",
        lambda: any(
            r.get("path") == "/sync"
            and r.get("namespace") == namespace
            and r.get("name") == "synced-under-policy"
            for r in release.log_records("hooks")
        ),
        timeout=60,
        interval=1,
        watch=[enforcement.process],
    )
    # The hooks' answer reached Metacontroller, which created the job's pod.
    node.wait_until(
        "the job's worker pod",
        lambda: ns.exists("pod/synced-under-policy-worker-0"),
        timeout=60,
        interval=1,
        watch=[enforcement.process],
    )


def test_the_webhook_port_is_open_to_every_pod(enforcement: Enforcement) -> None:
    assert {s for s in SOURCES if enforcement.after[(s, "webhooks", "https")]} == set(SOURCES)


def test_the_apiserver_calls_the_webhooks_under_the_policy(
    node: NodeControlPlane, enforcement: Enforcement, probes: dict[str, tuple[str, str]]
) -> None:
    namespace, _ = probes["tenant"]
    res = Namespace(node, namespace).create(
        job("PyTorchJob", name="two-masters", namespace=namespace, Master=2), check=False
    )
    assert res.returncode != 0
    assert "Master must have exactly 1 replica" in res.stderr, res.stderr


@pytest.mark.parametrize("component", ["hooks", "webhooks", "metacontroller"])
def test_a_metrics_port_admits_the_monitoring_namespace_only(
    enforcement: Enforcement, component: str
) -> None:
    assert {s for s in SOURCES if enforcement.after[(s, component, "metrics")]} == {"monitoring"}


def table(enforcement: Enforcement) -> str:
    """Each port's reachability from each probe, without and with the enforcer."""
    rows = [f"{'port':<22} " + " ".join(f"{s:>28}" for s in SOURCES)]
    for component, port_name in PORTS:
        cells = []
        for source in SOURCES:
            key = (source, component, port_name)
            cells.append(f"{'open' if enforcement.before[key] else 'refused'} -> "
                         f"{'open' if enforcement.after[key] else 'refused'}")  # fmt: skip
        rows.append(f"{component + ':' + port_name:<22} " + " ".join(f"{c:>28}" for c in cells))
    return "\n".join(rows)


def test_every_port_is_open_exactly_to_the_documented_sources(
    enforcement: Enforcement, capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print(
            "\n[networkpolicy] TCP connect from each probe pod, without -> with kube-router:\n"
            + table(enforcement)
        )
    opened = {
        (component, port_name): {s for s in SOURCES if enforcement.after[(s, component, port_name)]}
        for component, port_name in PORTS
    }
    assert opened == ALLOWED
