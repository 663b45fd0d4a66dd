"""A real node joined to the e2e control plane: containerd + runc + a CNI bridge + CoreDNS + kube-proxy +
kubelet, all on this machine, so pods are real containers with enforced limits (docs/build.md#real-node
says why it is set up this way).

``NodeControlPlane`` is ``controlplane.ControlPlane`` without kwok: after etcd, the apiserver (Node + RBAC
authorization, NodeRestriction, kubelet client certificate), KCM and the scheduler it starts

* a pull-only registry on loopback serving ``$CACHE/images/oci`` (registry.py), the only host containerd
  knows for ``docker.io`` and ``ghcr.io`` (hack/build-node.sh and hack/build-training-images.sh fill
  that layout);
* containerd with its own config, socket and state under ``/run/trainop-e2e-node`` and a persistent root
  under ``$CACHE/node/containerd`` (so image content survives between runs; containers never do);
* CoreDNS on the bridge address, serving ``cluster.local`` from the API and nothing else;
* the kubelet (node ``trainop-node-0``, node IP = the bridge address) and kube-proxy in iptables mode,
  so ClusterIP Services, the ``kubernetes`` Service included, work from pods.

Pod network: the bridge ``trainop-br0`` with 10.244.0.1/24; pods get an address on it and one route, to
the Service range through the bridge. No masquerade, no default route: pod traffic never leaves the
network namespaces the runtime made here. The apiserver listens on all local addresses and advertises the
bridge address, which is where the ``kubernetes`` Service leads.

One real node per machine (the bridge, port 53 on it, iptables chains and the ``kubepods`` cgroups are
machine-wide): a lock file serializes runs. Teardown drains the pods through the kubelet, stops every
process by PID, then removes what may be left: tasks and containers in containerd, shims serving this
socket, mounts under the run's dirs, network namespaces, the bridge, every ``KUBE-*`` iptables chain
(kube-proxy's, the kubelet's ``KUBE-KUBELET-CANARY``, the NetworkPolicy enforcer's ``KUBE-ROUTER-*``),
the enforcer's ipsets, empty ``kubepods`` cgroups, and the sysctls it changed. The same sweep runs before
a start, for what a killed run left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from controlplane import (
    ControlPlane,
    ControlPlaneError,
    ManagedProcess,
    default_bin_dir,
    default_cache_dir,
    free_ports,
)
from trainop_stack import TrainopStack

HERE = Path(__file__).resolve().parent
REGISTRY_SCRIPT = HERE / "registry.py"
NODE_NAME = "trainop-node-0"
BRIDGE = "trainop-br0"
POD_SUBNET = "10.244.0.0/24"
CLUSTER_CIDR = "10.244.0.0/16"
GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.96.0.0/12"
CLUSTER_DOMAIN = "cluster.local"
RUN_ROOT = Path("/run/trainop-e2e-node")
LOCK_PATH = Path("/run/trainop-e2e-node.lock")
NODE_BINARIES = ("kubelet", "kube-proxy", "coredns")
# The registries whose images containerd pulls from the loopback registry (and from nowhere else): the
# examples' and the project's images are docker.io's, Metacontroller's (the chart's default) ghcr.io's.
REGISTRY_HOSTS = ("docker.io", "ghcr.io")
# Run by this module, and by the kubelet and kube-proxy, which inherit its PATH.
# The annotation an OCI layout's index names an image with (buildah and hack/lib/oci_layout.py write it).
OCI_REF_NAME = "org.opencontainers.image.ref.name"
HOST_TOOLS = ("containerd", "ctr", "runc", "iptables", "ip6tables", "ip", "conntrack", "umount")
CGROUP_ROOT = Path("/sys/fs/cgroup")
PARTITION_COMMENT = "trainop-e2e partition"
# The enforcer's ipsets (test_networkpolicy.py's kube-router), removed with its KUBE-* chains.
IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-", "TMP-")
SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"}
# The sandbox hard limits are below containerd's and the kubelet's defaults (docs/build.md#real-node).
ULIMITS = 'ulimit -n "$(ulimit -Hn)"; ulimit -u 32768; exec "$@"'


def _run(*argv: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise ControlPlaneError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()}")
    return res


def _openssl(cwd: Path, *args: str) -> None:
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{res.stderr}")


def issue_client_cert(pki: Path, name: str, subject: str) -> None:
    """A client certificate signed by the run's CA (``ca.crt``/``ca.key`` in ``pki``)."""
    (pki / f"{name}.ext").write_text(
        "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    _openssl(pki, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", subject)  # fmt: skip
    _openssl(pki, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "365", "-extfile", f"{name}.ext")  # fmt: skip
    (pki / f"{name}.key").chmod(0o600)


def image_tag(bin_dir: Path, piece: str) -> str:
    """The tag hack/build-node.sh gave an image it built (its stamp)."""
    stamp = bin_dir / f".stamp-{piece}"
    try:
        return stamp.read_text().strip()
    except OSError:
        raise ControlPlaneError(f"no {stamp}: run hack/build-node.sh") from None


def dns_query_a(server: str, name: str, timeout: float = 2.0) -> list[str]:
    """The A records of ``name`` from ``server``:53 (one UDP query, no library needed)."""
    query = struct.pack(">HHHHHH", 0x7E57, 0x0100, 1, 0, 0, 0)
    query += b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    query += struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(query, (server, 53))
        data = s.recv(4096)
    answers = struct.unpack(">H", data[6:8])[0]
    pos = len(query)
    out = []
    for _ in range(answers):
        # Answers name the question by a 2-byte pointer (what CoreDNS sends); then type, class, ttl, length.
        pos += 2 if data[pos] & 0xC0 else data.index(b"\0", pos) + 1 - pos
        rtype, _cls, _ttl, length = struct.unpack(">HHIH", data[pos : pos + 10])
        pos += 10
        if rtype == 1 and length == 4:
            out.append(socket.inet_ntoa(data[pos : pos + 4]))
        pos += length
    return out


class NodeControlPlane(ControlPlane):
    """The e2e control plane with one real node instead of kwok; see the module docstring."""

    authorization_mode = "Node,RBAC"

    def __init__(self, bin_dir: Path, work_dir: Path, *, cache_dir: Path | None = None) -> None:
        super().__init__(bin_dir, work_dir)
        self.cache_dir = (cache_dir or default_cache_dir()).resolve()
        self.layout = self.cache_dir / "images" / "oci"
        self.containerd_root = self.cache_dir / "node" / "containerd"
        self.run_dir = RUN_ROOT
        self.sock = self.run_dir / "containerd" / "containerd.sock"
        self.kubelet_root = self.work_dir / "kubelet"
        self.node_name = NODE_NAME
        (
            self.registry_port,
            self.kubelet_port,
            self.kubelet_healthz_port,
            self.proxy_healthz_port,
            self.proxy_metrics_port,
            self.dns_ready_port,
        ) = free_ports(6)
        self.registry = f"127.0.0.1:{self.registry_port}"
        self.pause_image = f"docker.io/trainop-e2e/pause:{image_tag(self.bin_dir, 'pause')}"
        self.toolbox_image = f"trainop-e2e/toolbox:{image_tag(self.bin_dir, 'toolbox')}"
        self.apiserver_args += [
            "--enable-admission-plugins=NodeRestriction",
            f"--kubelet-client-certificate={self.pki / 'admin.crt'}",
            f"--kubelet-client-key={self.pki / 'admin.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            # Pods reach the apiserver through the kubernetes Service, whose endpoint is the advertised
            # address: the bridge's. Loopback clients keep using 127.0.0.1.
            "--bind-address=0.0.0.0",
            f"--advertise-address={GATEWAY}",
            "--endpoint-reconciler-type=lease",
        ]
        self._lock: int | None = None
        self._saved_sysctls: dict[str, str] = {}

    # ------------------------------------------------------------------ host commands
    def ctr(self, *args: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return _run("ctr", "--address", str(self.sock), "--namespace", "k8s.io", *args, check=check,
                    timeout=timeout)  # fmt: skip

    def _containerd_up(self) -> bool:
        return self.sock.exists() and self.ctr("version", check=False, timeout=10).returncode == 0

    # ------------------------------------------------------------------ orchestration
    def start(
        self, crds: Sequence[str | Path] = (), *, nodes: int = 1, metacontroller: bool = False
    ) -> NodeControlPlane:
        if nodes != 1:
            raise ValueError(f"a real-node control plane has exactly one node, not {nodes}")
        if metacontroller:
            crds = [*crds, self.metacontroller_crds()]
        self._t0 = time.monotonic()
        missing = [tool for tool in HOST_TOOLS if not shutil.which(tool)]
        if missing:
            raise ControlPlaneError(
                f"{missing} not on PATH ({os.environ.get('PATH')}): hack/build-node.sh installs them "
                "(iptables is in /usr/sbin, which hack/test.sh adds to PATH)"
            )
        try:
            self.acquire_lock()
            self.sweep_host()
            self.generate_pki()
            self.timings["pki"] = time.monotonic() - self._t0
            self.setup_host_network()
            self.start_etcd()
            self.start_apiserver()
            if crds:
                self.apply_crds(*crds)
                self.timings["crds_established"] = time.monotonic() - self._t0
            self.start_controller_manager()
            self.start_scheduler()
            self.start_registry()
            self.start_containerd()
            self.prune_stale_images()
            self.start_coredns()
            self.start_kubelet()
            self.start_kube_proxy()
            self.wait_node_ready()
            self.wait_for_default_serviceaccount("default")
            if metacontroller:
                self.start_metacontroller()
            self.timings["total_startup"] = time.monotonic() - self._t0
        except BaseException:
            self.stop()
            raise
        return self

    def acquire_lock(self, timeout: float = 1800.0) -> None:
        fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise ControlPlaneError(f"another real-node run holds {LOCK_PATH}") from None
                time.sleep(1)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.work_dir}\n".encode())
        self._lock = fd

    def release_lock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def generate_pki(self) -> None:
        super().generate_pki()
        # The Node authorizer and NodeRestriction know a kubelet by this identity.
        issue_client_cert(self.pki, "kubelet", f"/O=system:nodes/CN=system:node:{self.node_name}")

    def setup_host_network(self) -> None:
        """The bridge with the gateway address (before CoreDNS binds it and the kubelet claims it as
        node IP) and the sysctls a bridge plus kube-proxy need; their old values are restored at stop."""
        for key, value in SYSCTLS.items():
            path = Path("/proc/sys") / key
            old = path.read_text().strip()
            if old != value:
                self._saved_sysctls[key] = old
                path.write_text(value)
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        # The host's own connections to ClusterIPs (the apiserver calling a webhook Service) leave from the
        # bridge address, which pods can answer; by the default route they would come from an address
        # pods have no route back to. The route goes away with the bridge.
        _run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE, "src", GATEWAY)

    # ------------------------------------------------------------------ components
    def start_with_ulimits(self, name: str, argv: Sequence[str | os.PathLike[str]]) -> ManagedProcess:
        return self.start_process(name, ["bash", "-c", ULIMITS, name, *argv])

    def start_registry(self, timeout: float = 30.0) -> ManagedProcess:
        proc = self.start_process("registry", [
            sys.executable, REGISTRY_SCRIPT, f"--layout={self.layout}", f"--port={self.registry_port}",
        ])  # fmt: skip
        self.wait_http("registry /v2/", f"http://{self.registry}/v2/", None, timeout, watch=[proc])
        return proc

    def containerd_config(self) -> Path:
        hosts = self.work_dir / "registry-hosts"
        # `server` replaces each upstream: a missing image fails here instead of going elsewhere.
        for upstream in REGISTRY_HOSTS:
            (hosts / upstream).mkdir(parents=True, exist_ok=True)
            (hosts / upstream / "hosts.toml").write_text(
                f'server = "http://{self.registry}"\n\n'
                f'[host."http://{self.registry}"]\n  capabilities = ["pull", "resolve"]\n'
            )
        cni = self.work_dir / "cni"
        cni.mkdir(exist_ok=True)
        conflist = {
            "cniVersion": "0.4.0",
            "name": "trainop-e2e",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET, "gateway": GATEWAY}]],
                        # The only route: Services, through the bridge, where kube-proxy's DNAT is.
                        "routes": [{"dst": SERVICE_CIDR}],
                        "dataDir": str(self.run_dir / "cni-ipam"),
                    },
                }
            ],
        }
        # Written before containerd starts: without it the node never reports NetworkReady.
        (cni / "10-trainop-e2e.conflist").write_text(json.dumps(conflist, indent=1))
        root, state = self.containerd_root, self.run_dir / "containerd"
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{self.sock}"
[ttrpc]
  address = "{self.sock}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
[{cri}]
  sandbox_image = "{self.pause_image}"
  disable_apparmor = true
  disable_hugetlb_controller = true
  tolerate_missing_hugetlb_controller = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
  [{cri}.registry]
    config_path = "{hosts}"
"""
        path = self.work_dir / "containerd.toml"
        path.write_text(config)
        return path

    def start_containerd(self, timeout: float = 30.0) -> ManagedProcess:
        self.containerd_root.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "containerd").mkdir(parents=True, exist_ok=True)
        proc = self.start_with_ulimits("containerd", ["containerd", "--config", self.containerd_config()])
        self.wait_until("containerd", self._containerd_up, timeout=timeout, interval=0.3, watch=[proc])
        # The root persists for the images; containers of an earlier, killed run must not.
        self.remove_runtime_objects()
        self.timings["containerd_ready"] = time.monotonic() - self._t0
        return proc

    def start_coredns(self, timeout: float = 60.0) -> ManagedProcess:
        corefile = self.work_dir / "Corefile"
        # No `forward`: names outside the cluster get no answer instead of a query leaving the machine.
        corefile.write_text(
            f".:53 {{\n  bind {GATEWAY}\n  errors\n  ready 127.0.0.1:{self.dns_ready_port}\n"
            f"  kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
            f"    kubeconfig {self.kubeconfig} e2e\n    pods insecure\n"
            "    fallthrough in-addr.arpa ip6.arpa\n  }\n}\n"
        )
        proc = self.start_process("coredns", [self._bin("coredns"), "-conf", corefile])
        self.wait_http("coredns /ready", f"http://127.0.0.1:{self.dns_ready_port}/ready", None, timeout,
                       watch=[proc])  # fmt: skip
        self.wait_until(
            "coredns answers kubernetes.default",
            lambda: dns_query_a(GATEWAY, f"kubernetes.default.svc.{CLUSTER_DOMAIN}") == ["10.96.0.1"],
            timeout=timeout,
            watch=[proc],
        )
        self.timings["coredns_ready"] = time.monotonic() - self._t0
        return proc

    def kubelet_config(self) -> Path:
        config: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": GATEWAY,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.kubelet_healthz_port,
            "containerRuntimeEndpoint": f"unix://{self.sock}",
            "cgroupDriver": "cgroupfs",
            "failCgroupV1": False,
            "failSwapOn": False,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.pki / "ca.crt")},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
            "clusterDNS": [GATEWAY],
            "clusterDomain": CLUSTER_DOMAIN,
            # Pods with dnsPolicy Default get no resolver: nothing outside the cluster is reachable.
            "resolvConf": "",
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "imageGCHighThresholdPercent": 99,
            "imageGCLowThresholdPercent": 98,
            "maxPods": 60,
            "podLogsDir": str(self.work_dir / "pod-logs"),
            "serializeImagePulls": False,
            "runtimeRequestTimeout": "10m",
            "containerLogMaxSize": "10Mi",
        }
        path = self.work_dir / "kubelet.json"
        path.write_text(json.dumps(config, indent=1))
        return path

    def start_kubelet(self, timeout: float = 60.0) -> ManagedProcess:
        self.kubelet_root.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "kubelet-root").write_text(str(self.kubelet_root))
        kubeconfig = self.write_client_kubeconfig(self.work_dir / "kubelet.kubeconfig", "kubelet")
        proc = self.start_with_ulimits("kubelet", [
            self._bin("kubelet"), f"--config={self.kubelet_config()}", f"--kubeconfig={kubeconfig}",
            f"--root-dir={self.kubelet_root}", f"--cert-dir={self.kubelet_root / 'pki'}",
            f"--hostname-override={self.node_name}", f"--node-ip={GATEWAY}", "--v=1",
        ])  # fmt: skip
        self.wait_http("kubelet /healthz", f"http://127.0.0.1:{self.kubelet_healthz_port}/healthz", None,
                       timeout, watch=[proc])  # fmt: skip
        self.wait_until(
            f"node {self.node_name} registered",
            lambda: self.kubectl("get", "node", self.node_name, check=False).returncode == 0,
            timeout=timeout,
            interval=0.5,
            watch=[proc],
        )
        self.timings["kubelet_registered"] = time.monotonic() - self._t0
        return proc

    def start_kube_proxy(self, timeout: float = 60.0) -> ManagedProcess:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig)},
            "hostnameOverride": self.node_name,
            "healthzBindAddress": f"127.0.0.1:{self.proxy_healthz_port}",
            "metricsBindAddress": f"127.0.0.1:{self.proxy_metrics_port}",
            "mode": "iptables",
            "clusterCIDR": CLUSTER_CIDR,
            # Zero leaves the machine's conntrack sysctls alone.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            # No route_localnet, no NodePorts on the machine's own addresses.
            "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
            "nodePortAddresses": [f"{GATEWAY}/32"],
        }
        path = self.work_dir / "kube-proxy.json"
        path.write_text(json.dumps(config, indent=1))
        proc = self.start_process("kube-proxy", [self._bin("kube-proxy"), f"--config={path}", "--v=1"])
        self.wait_http("kube-proxy /healthz", f"http://127.0.0.1:{self.proxy_healthz_port}/healthz",
                       None, timeout, watch=[proc])  # fmt: skip
        self.timings["kube_proxy_ready"] = time.monotonic() - self._t0
        return proc

    def wait_node_ready(self, timeout: float = 120.0) -> None:
        def ready() -> bool:
            node = self.get_json(f"node/{self.node_name}")
            conds = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
            taints = node.get("spec", {}).get("taints") or []
            return conds.get("Ready") == "True" and not taints

        # KCM lifts node.kubernetes.io/not-ready after Ready; the scheduler places nothing before.
        self.wait_until(f"node {self.node_name} Ready and untainted", ready, timeout=timeout, interval=0.5)
        self.timings["node_ready"] = time.monotonic() - self._t0

    # ------------------------------------------------------------------ test helpers
    @contextlib.contextmanager
    def partition(self, port: int) -> Iterator[None]:
        """Pod-to-pod TCP to ``port`` is refused while inside: a network that lost a rendezvous port.

        Bridged frames pass iptables' FORWARD (bridge-nf-call-iptables), so one REJECT rule on the bridge
        cuts every connection between pods on that port, whichever pod starts first.
        """
        rule = ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-p", "tcp", "--dport", str(port),
                "-m", "comment", "--comment", PARTITION_COMMENT,
                "-j", "REJECT", "--reject-with", "tcp-reset"]  # fmt: skip
        _run("iptables", "-I", *rule)
        try:
            yield
        finally:
            _run("iptables", "-D", *rule, check=False)

    def running_containers(self, namespace: str) -> list[str]:
        """``pod/container`` of every container (no pause sandbox) running for pods of ``namespace``."""
        running = set()
        for line in self.ctr("tasks", "ls").stdout.splitlines()[1:]:
            task, _pid, status = line.split()[:3]
            if status == "RUNNING":
                running.add(task)
        out = []
        for cid in self.ctr(
            "containers", "ls", "-q", f'labels."io.kubernetes.pod.namespace"=={namespace}'
        ).stdout.split():
            if cid not in running:
                continue
            labels = json.loads(self.ctr("containers", "info", cid).stdout).get("Labels") or {}
            if labels.get("io.cri-containerd.kind") == "container":
                out.append(
                    f"{labels.get('io.kubernetes.pod.name')}/{labels.get('io.kubernetes.container.name')}"
                )
        return sorted(out)

    # ------------------------------------------------------------------ teardown
    def stop(self) -> None:
        if self._lock is None:  # never started, or another run holds the node: nothing here is ours
            super().stop()
            return
        try:
            self.drain_pods()
            runtime = {"containerd", "registry"}
            for proc in [p for p in reversed(self.processes) if p.name not in runtime]:
                with contextlib.suppress(Exception):
                    self.stop_process(proc)
            with contextlib.suppress(Exception):
                if self._containerd_up():
                    self.remove_runtime_objects()
            super().stop()
            self.sweep_host()
        finally:
            self.release_lock()

    def drain_pods(self, timeout: float = 60.0) -> None:
        """Delete every pod while the kubelet runs, so it stops them properly (CNI DEL included)."""
        names = {p.name for p in self.processes if p.alive()}
        if not {"kube-apiserver", "kubelet", "containerd"} <= names:
            return
        self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force",
                     "--wait=false", check=False, timeout=30)  # fmt: skip
        with contextlib.suppress(ControlPlaneError):
            self.wait_until(
                "every container stopped",
                lambda: not self.ctr("tasks", "ls", "-q", timeout=10).stdout.split(),
                timeout=timeout,
                interval=0.5,
                watch=[],
            )

    def prune_stale_images(self) -> None:
        """Remove from containerd's persistent store every image the layout no longer serves.

        Image content survives between runs so that an unchanged image is not pulled again; without this,
        each rebuild of an image (the torch one is 6 GB unpacked) would stay on disk for good.
        """
        index_file = self.layout / "index.json"
        index = json.loads(index_file.read_text()) if index_file.exists() else {}
        # An entry without a name is an image a rebuild replaced: nothing pulls it any more.
        served = {
            m["digest"] for m in index.get("manifests", []) if (m.get("annotations") or {}).get(OCI_REF_NAME)
        }
        stale = []
        for line in self.ctr("images", "ls").stdout.splitlines()[1:]:
            ref, _type, digest, *_ = line.split()
            if digest not in served:
                stale.append(ref)
        if stale:
            self.ctr("images", "rm", "--sync", *stale, timeout=600.0)
        self.timings["stale_images_removed"] = len(stale)

    def remove_runtime_objects(self) -> None:
        """Kill and delete every task and container in containerd's k8s.io namespace."""
        for task in self.ctr("tasks", "ls", "-q", check=False).stdout.split():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False)
        deadline = time.monotonic() + 10
        while self.ctr("tasks", "ls", "-q", check=False).stdout.split() and time.monotonic() < deadline:
            time.sleep(0.2)
        for task in self.ctr("tasks", "ls", "-q", check=False).stdout.split():
            self.ctr("tasks", "delete", "--force", task, check=False)
        for container in self.ctr("containers", "ls", "-q", check=False).stdout.split():
            self.ctr("containers", "delete", container, check=False)

    def sweep_host(self) -> None:
        """Remove whatever a run of this tier (this one, or one that was killed) left on the machine."""
        self._kill_leftover_processes()
        self._unmount_under([self.run_dir, self.containerd_root, *self._kubelet_roots()])
        with contextlib.suppress(OSError):
            shutil.rmtree(self.run_dir / "containerd" / "netns")
        if _run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
            _run("ip", "link", "del", BRIDGE)
        self._remove_kube_chains()
        self._remove_policy_ipsets()
        self._remove_kubepods_cgroups()
        for key, value in self._saved_sysctls.items():
            with contextlib.suppress(OSError):
                (Path("/proc/sys") / key).write_text(value)
        self._saved_sysctls = {}
        with contextlib.suppress(OSError):
            shutil.rmtree(self.run_dir / "cni-ipam")

    def _kubelet_roots(self) -> list[Path]:
        roots = [self.kubelet_root]
        with contextlib.suppress(OSError):
            roots.append(Path((self.run_dir / "kubelet-root").read_text().strip()))
        return roots

    def _kill_leftover_processes(self) -> None:
        """containerd shims serving this socket and anything still in the kubepods cgroups, by PID."""
        address = str(self.sock)
        pids: set[int] = set()
        for proc_dir in Path("/proc").iterdir():
            if not proc_dir.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = (proc_dir / "cmdline").read_bytes().split(b"\0")
                if b"containerd-shim" in argv[0] and address.encode() in argv:
                    pids.add(int(proc_dir.name))
                    continue
                cgroups = (proc_dir / "cgroup").read_text()
                if any(line.split(":", 2)[-1].startswith("/kubepods") for line in cgroups.splitlines()):
                    pids.add(int(proc_dir.name))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        deadline = time.monotonic() + 5
        while pids and time.monotonic() < deadline:
            pids = {p for p in pids if Path(f"/proc/{p}").exists()}
            time.sleep(0.1)

    @staticmethod
    def _unmount_under(roots: Sequence[Path]) -> None:
        prefixes = [str(r.resolve()) + "/" for r in roots]
        points = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if any((point + "/").startswith(p) for p in prefixes):
                points.append(point)
        for point in sorted(points, key=len, reverse=True):
            _run("umount", "--lazy", point, check=False)

    @staticmethod
    def _remove_kube_chains() -> None:
        """Every KUBE-* chain (kube-proxy's, the kubelet's canaries), the rules that jump to them, and a
        partition rule a killed test left."""
        for tool in ("iptables", "ip6tables"):
            if not shutil.which(tool):
                continue
            for table in ("filter", "nat", "mangle"):
                rules = _run(tool, "-t", table, "-S", check=False).stdout.splitlines()
                for rule in rules:
                    parts = shlex.split(rule)  # comments are quoted: "kubernetes service portals"
                    ours = "KUBE-" in rule or PARTITION_COMMENT in rule
                    if parts[:1] == ["-A"] and not parts[1].startswith("KUBE-") and ours:
                        _run(tool, "-t", table, "-D", *parts[1:], check=False)
                chains = [r.split()[1] for r in rules if r.startswith("-N KUBE-")]
                for chain in chains:
                    _run(tool, "-t", table, "-F", chain, check=False)
                for chain in chains:
                    _run(tool, "-t", table, "-X", chain, check=False)

    @staticmethod
    def _policy_ipsets() -> list[str]:
        """The ipsets of test_networkpolicy.py's enforcer (kube-router's KUBE-SRC-*, KUBE-DST-* and its
        TMP-* swap sets); none where ipset is not installed."""
        if not shutil.which("ipset"):
            return []
        names = _run("ipset", "list", "-n", check=False).stdout.split()
        return [n for n in names if n.startswith(IPSET_PREFIXES)]

    @classmethod
    def _remove_policy_ipsets(cls) -> None:
        # After the chains: a set that a rule still names cannot be destroyed.
        for name in cls._policy_ipsets():
            _run("ipset", "destroy", name, check=False)

    @staticmethod
    def _remove_kubepods_cgroups() -> None:
        for controller in CGROUP_ROOT.iterdir() if CGROUP_ROOT.is_dir() else []:
            top = controller / "kubepods"
            if not top.is_dir():
                continue
            nested = sorted(
                (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
            )
            for path in nested:
                with contextlib.suppress(OSError):
                    path.rmdir()
            with contextlib.suppress(OSError):
                top.rmdir()

    def leftovers(self) -> list[str]:
        """What teardown should have removed and did not; empty after a clean stop."""
        out = [f"process {name}" for name in self.leftover_processes()]
        if _run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
            out.append(f"bridge {BRIDGE}")
        for tool in ("iptables", "ip6tables"):
            for table in ("filter", "nat", "mangle"):
                if shutil.which(tool):
                    rules = _run(tool, "-t", table, "-S").stdout.splitlines()
                    chains = [r for r in rules if "KUBE-" in r or PARTITION_COMMENT in r]
                    out += [f"{tool} -t {table}: {c}" for c in chains]
        out += [f"ipset {name}" for name in self._policy_ipsets()]
        prefixes = [str(p.resolve()) + "/" for p in (self.run_dir, self.containerd_root, self.kubelet_root)]
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4]
            if any((point + "/").startswith(p) for p in prefixes):
                out.append(f"mount {point}")
        for proc_dir in Path("/proc").iterdir():
            if proc_dir.name.isdigit():
                with contextlib.suppress(OSError):
                    argv = (proc_dir / "cmdline").read_bytes()
                    if b"containerd-shim" in argv and str(self.sock).encode() in argv:
                        out.append(f"shim pid {proc_dir.name}")
        return out


class RealNodeStack(TrainopStack):
    """``TrainopStack`` (webhooks, hooks, Metacontroller as host processes) on a ``NodeControlPlane``.

    The hooks are configured with the images built here for their init containers, as an operator
    deployment sets Kubeflow's ``--pytorch-init-container-image`` and ``--mpi-kubectl-delivery-image``.
    """

    def __init__(self, work_dir: Path, bin_dir: Path | None = None, **kwargs: Any) -> None:
        super().__init__(work_dir, bin_dir, **kwargs)
        self.cp = NodeControlPlane(bin_dir or default_bin_dir(), self.work_dir)
        self.node: NodeControlPlane = self.cp

    def _python_env(self) -> dict[str, str]:
        return {
            **super()._python_env(),
            "TRAINOP_PYTORCH_INIT_IMAGE": self.node.toolbox_image,
            "TRAINOP_MPI_KUBECTL_DELIVERY_IMAGE": self.node.toolbox_image,
        }
