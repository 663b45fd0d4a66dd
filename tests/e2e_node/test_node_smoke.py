"""The real node itself: pods are containers, logs and exec work, cluster DNS and Services work from pods.

Every pod runs the toolbox image hack/build-node.sh builds (busybox + kubectl), pulled by containerd
from the tier's loopback registry.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from trainop_stack import Namespace

from tests.e2e_node.realnode import GATEWAY, POD_SUBNET, RealNodeStack


def pod(image: str, name: str, script: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": image, "command": ["sh", "-c", script]}],
        },
    }


def service(
    name: str, selector: dict[str, str], port: int, target: int, headless: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": selector, "ports": [{"port": port, "targetPort": target}]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def run_to_completion(ns: Namespace, obj: dict[str, Any], timeout: float = 120.0) -> str:
    """Create the pod, wait until it Succeeded, return its logs."""
    ns.create(obj)
    name = obj["metadata"]["name"]
    try:
        ns.wait_phase(name, "Succeeded", timeout)
    except AssertionError as e:
        logs = ns.kubectl("logs", name, check=False)
        status = ns.get(f"pod/{name}")["status"]
        raise AssertionError(f"{e}\nlogs:\n{logs.stdout}{logs.stderr}\nstatus: {status}") from None
    return ns.kubectl("logs", name).stdout


def test_node_is_ready_with_the_bridge_address(node_stack: RealNodeStack) -> None:
    node = node_stack.cp.get_json(f"node/{node_stack.node.node_name}")
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == GATEWAY
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")


def test_pod_runs_as_a_container_and_its_logs_are_served(node_stack: RealNodeStack, ns: Namespace) -> None:
    logs = run_to_completion(ns, pod(node_stack.node.toolbox_image, "hello", "echo hello from $(hostname)"))
    assert logs.strip() == "hello from hello"
    ip = ns.get("pod/hello")["status"]["podIP"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(POD_SUBNET)


def test_exec_reaches_a_running_container(node_stack: RealNodeStack, ns: Namespace) -> None:
    ns.create(pod(node_stack.node.toolbox_image, "sleeper", "sleep 300"))
    ns.wait_phase("sleeper", "Running", 120)
    out = ns.kubectl("exec", "sleeper", "--", "sh", "-c", "echo $((6 * 7)) from $(hostname)").stdout
    assert out.strip() == "42 from sleeper"


def test_pods_have_no_default_route(node_stack: RealNodeStack, ns: Namespace) -> None:
    # Only the pod subnet and the Service range: nothing a pod sends can be routed off this machine.
    logs = run_to_completion(ns, pod(node_stack.node.toolbox_image, "routes", "ip route"))
    routes = [line.split()[0] for line in logs.splitlines() if line.strip()]
    assert "default" not in routes
    assert set(routes) == {"10.96.0.0/12", POD_SUBNET}, logs


def test_headless_service_resolves_to_the_pod_ip(node_stack: RealNodeStack, ns: Namespace) -> None:
    image = node_stack.node.toolbox_image
    ns.create(pod(image, "target", "sleep 300", labels={"app": "target"}))
    ns.create(service("target", {"app": "target"}, 80, 80, headless=True))
    ip = ns.wait_phase("target", "Running", 120)["status"]["podIP"]
    logs = run_to_completion(ns, pod(image, "resolver", f"nslookup target.{ns.name}.svc.cluster.local"))
    assert ip in logs, logs


def test_cluster_ip_service_reaches_a_pod_through_kube_proxy(
    node_stack: RealNodeStack, ns: Namespace
) -> None:
    image = node_stack.node.toolbox_image
    serve = "mkdir -p /www && echo served by $(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www"
    ns.create(pod(image, "web", serve, labels={"app": "web"}))
    ns.create(service("web", {"app": "web"}, 80, 8080))
    ns.wait_phase("web", "Running", 120)
    cluster_ip = ns.get("service/web")["spec"]["clusterIP"]
    assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network("10.96.0.0/12")
    # The name resolves to the ClusterIP (CoreDNS), and the ClusterIP leads to the pod (kube-proxy's DNAT);
    # retried while the endpoints propagate. busybox's nslookup and nc: its wget, a static glibc binary,
    # crashes looking up the "http" service through NSS.
    request = r"printf 'GET / HTTP/1.0\r\n\r\n'"
    script = (
        f"nslookup web.{ns.name}.svc.cluster.local | grep -q 'Address: {cluster_ip}$' || exit 2; "
        f"for i in $(seq 30); do {request} | nc -w 2 {cluster_ip} 80 | tail -n 1 | grep . && exit 0; "
        "sleep 1; done; exit 1"
    )
    logs = run_to_completion(ns, pod(image, "client", script))
    assert logs.strip() == "served by web"


def test_pods_reach_the_apiserver_through_the_kubernetes_service(
    node_stack: RealNodeStack, ns: Namespace
) -> None:
    # In-cluster kubectl: KUBERNETES_SERVICE_HOST (10.96.0.1) + the pod's ServiceAccount token, which is
    # what the MPI launcher's `kubectl exec` relies on.
    script = "kubectl get --raw /version"
    logs = run_to_completion(ns, pod(node_stack.node.toolbox_image, "incluster", script))
    assert json.loads(logs)["gitVersion"] == "v1.36.3"
