"""A real, single-node Kubernetes control plane on loopback for the e2e suite, without containers.

Runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake node + pod
lifecycle driven by ``kwok-stages.yaml``) from binaries built by ``hack/build-control-plane.sh``.
Every process gets its own session (so teardown can ``killpg`` the whole tree) and a log file in
the work dir; every port is a random free 127.0.0.1 port.

Only the standard library and the ``openssl`` CLI are used, so this module works before any
project dependency is installed. Typical use::

    with ControlPlane(default_bin_dir(), Path(tmp)) as cp:
        cp.start(crds=[Path("manifests/crds")])
        cp.kubectl("get", "nodes")
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from trainop.local.ports import free_ports

HERE = Path(__file__).resolve().parent
KWOK_STAGES = HERE / "kwok-stages.yaml"
CHART_VALUES = HERE.parents[1] / "charts" / "trainop" / "values.yaml"
CONTROL_PLANE_BINARIES = (
    "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "metacontroller"
)  # fmt: skip
NODE_NAME = "kwok-node-0"
# Go and Python clients must never send loopback traffic through a proxy the machine may set.
NO_PROXY_ENV = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def default_cache_dir() -> Path:
    """Where ``hack/build-control-plane.sh`` puts its output."""
    return Path(os.environ.get("TRAINOP_E2E_CACHE", str(Path.home() / ".cache" / "trainop-e2e")))


def default_bin_dir() -> Path:
    return Path(os.environ.get("TRAINOP_E2E_BIN", str(default_cache_dir() / "bin")))


def missing_binaries(bin_dir: Path, names: Iterable[str] = CONTROL_PLANE_BINARIES) -> list[str]:
    return [n for n in names if not os.access(bin_dir / n, os.X_OK)]


def chart_metacontroller_args() -> list[str]:
    """``metacontroller.commandArgs`` of the chart's values.yaml: the e2e suite runs Metacontroller as
    the chart does. Parsed by hand because this module needs no third-party package."""
    args: list[str] = []
    inside = False
    for line in CHART_VALUES.read_text().splitlines():
        if line.strip() == "commandArgs:" and line.startswith("  ") and not line.startswith("   "):
            inside = True
            continue
        if inside:
            stripped = line.strip()
            if stripped.startswith("- "):
                args.append(stripped[2:].strip().strip('"'))
            elif stripped and not stripped.startswith("#"):
                break
    if not args:
        raise ControlPlaneError(f"no metacontroller.commandArgs in {CHART_VALUES}")
    return args


def tail(path: Path, limit: int = 4000) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode(errors="replace")
    except OSError:
        return "<no log>"


def built_by(script: Path, binary: Path, log_path: Path) -> Path:
    """Run one of hack/'s build scripts (a no-op when its piece is cached) for ``binary``; raise
    ControlPlaneError with the log's tail if it failed or left no executable."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        res = subprocess.run(
            ["bash", str(script)], stdout=log, stderr=subprocess.STDOUT, cwd=script.parents[1]
        )
    if res.returncode != 0 or not os.access(binary, os.X_OK):
        raise ControlPlaneError(
            f"{script.name} exited {res.returncode}; {binary} missing or not executable; "
            f"build log {log_path}:\n{tail(log_path)}"
        )
    return binary


class ControlPlaneError(RuntimeError):
    pass


@dataclass
class ManagedProcess:
    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise ControlPlaneError(
                f"{self.name} exited with code {self.popen.returncode}; log {self.log_path}:\n"
                f"{tail(self.log_path)}"
            )

    def tail(self, limit: int = 4000) -> str:
        return tail(self.log_path, limit)

    def group_alive(self) -> bool:
        """True while any process of this process group (the child and its children) exists."""
        try:
            os.killpg(self.popen.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def stop(self, grace: float = 10.0) -> None:
        # Signal the group even if the leader already exited: gunicorn workers and the like
        # may outlive it.
        pgid = self.popen.pid
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                self.popen.poll()  # reap the leader so it does not linger as a zombie
                if not self.group_alive():
                    break
                time.sleep(0.05)
            else:
                continue
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None


def _opener(ctx: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if ctx is not None:
        handlers.append(urllib.request.HTTPSHandler(context=ctx))
    return urllib.request.build_opener(*handlers)


def _insecure_ctx() -> ssl.SSLContext:
    # KCM and the scheduler serve /healthz with self-generated certs; only liveness matters there.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _openssl(cwd: Path, *args: str) -> None:
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{res.stderr}")


def generate_pki(pki: Path) -> None:
    """CA, apiserver serving cert, admin client cert (system:masters), webhook cert, SA keypair."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl(
        pki, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "3650", "-subj", "/CN=e2e-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    server_ku = "keyUsage=critical,digitalSignature,keyEncipherment\n"

    def leaf(name: str, subject: str, ext: str) -> None:
        (pki / f"{name}.ext").write_text(ext)
        _openssl(pki, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", "-subj", subject)  # fmt: skip
        _openssl(pki, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "365",
                 "-extfile", f"{name}.ext")  # fmt: skip

    # Go rejects CN-only server certs, hence the IP SANs.
    leaf(
        "apiserver", "/CN=kube-apiserver",
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,IP:10.96.0.1\nextendedKeyUsage=serverAuth\n" + server_ku,
    )  # fmt: skip
    leaf("admin", "/O=system:masters/CN=e2e-admin", "extendedKeyUsage=clientAuth\n" + server_ku)
    leaf("webhook", "/CN=e2e-webhook",
         "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n" + server_ku)  # fmt: skip
    _openssl(pki, "genrsa", "-out", "sa.key", "2048")
    _openssl(pki, "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
    for key in pki.glob("*.key"):
        key.chmod(0o600)


class ControlPlane:
    """etcd + kube-apiserver + KCM + scheduler + kwok on 127.0.0.1; see the module docstring."""

    # A list flag: a second --authorization-mode in extra args would repeat RBAC, which the apiserver
    # refuses, so a subclass with a real kubelet (Node authorizer) overrides this instead.
    authorization_mode = "RBAC"

    def __init__(
        self,
        bin_dir: Path,
        work_dir: Path,
        *,
        kwok_stages: Path = KWOK_STAGES,
        kubectl_bin: str | None = None,
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: Sequence[str] = (),
    ) -> None:
        self.bin_dir = bin_dir.resolve()
        # Alpha features (e.g. kube-scheduler's gang scheduling) for apiserver, KCM and scheduler alike;
        # `runtime_config` serves the alpha API groups they need.
        self.feature_gates = dict(feature_gates or {})
        self.runtime_config = list(runtime_config)
        self.work_dir = work_dir.resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.pki = self.work_dir / "pki"
        self.kubeconfig = self.work_dir / "admin.kubeconfig"
        self.kwok_stages = kwok_stages
        self.processes: list[ManagedProcess] = []
        # Every process ever started, kept after teardown so callers can verify nothing survived.
        self.started: list[ManagedProcess] = []
        self.timings: dict[str, float] = {}
        self.metacontroller_metrics_port: int | None = None
        # Extra kube-apiserver flags (e.g. an audit policy), kept so a restarted apiserver gets them too.
        self.apiserver_args: list[str] = []
        (
            self.etcd_port,
            self.etcd_peer_port,
            self.api_port,
            self.kcm_port,
            self.scheduler_port,
        ) = free_ports(5)
        self.server = f"https://127.0.0.1:{self.api_port}"
        found = kubectl_bin or (
            str(self.bin_dir / "kubectl") if os.access(self.bin_dir / "kubectl", os.X_OK) else None
        )
        self.kubectl_bin = found or shutil.which("kubectl") or "kubectl"
        self._t0 = time.monotonic()

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ generic helpers
    @property
    def env(self) -> dict[str, str]:
        """Environment for anything that talks to this cluster (kubectl, gunicorn, controllers)."""
        return {**os.environ, **NO_PROXY_ENV, "KUBECONFIG": str(self.kubeconfig)}

    def start_process(
        self,
        name: str,
        argv: Sequence[str | os.PathLike[str]],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ManagedProcess:
        """Start a long-running process in its own session, logging to ``<work_dir>/<name>.log``.

        It is registered for teardown (reverse start order), so callers need not stop it.
        """
        log_path = self.work_dir / f"{name}.log"
        log = log_path.open("ab")
        args = [os.fspath(a) for a in argv]
        log.write(f"+ {' '.join(args)}\n".encode())
        log.flush()
        try:
            popen = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**self.env, **(env or {})},
                cwd=cwd,
            )
        except BaseException:
            log.close()
            raise
        proc = ManagedProcess(name, args, popen, log_path, log)
        self.processes.append(proc)
        self.started.append(proc)
        return proc

    def stop_process(self, proc: ManagedProcess) -> None:
        proc.stop()
        if proc in self.processes:
            self.processes.remove(proc)

    def wait_until(
        self,
        what: str,
        check: Callable[[], bool],
        timeout: float = 60.0,
        interval: float = 0.2,
        watch: Sequence[ManagedProcess] | None = None,
    ) -> None:
        """Poll ``check`` until true; fail fast if a watched process dies, with log tails on timeout."""
        procs = list(self.processes if watch is None else watch)
        deadline = time.monotonic() + timeout
        last_error: object = None
        while True:
            for p in procs:
                p.check_alive()
            try:
                if check():
                    return
            except Exception as e:  # "not ready yet" has many shapes
                last_error = e
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name} ({p.log_path}):\n{p.tail()}" for p in procs)
                raise ControlPlaneError(
                    f"timed out after {timeout:.0f}s waiting for {what}: {last_error}\n{logs}"
                )
            time.sleep(interval)

    def wait_http(
        self,
        what: str,
        url: str,
        ctx: ssl.SSLContext | None,
        timeout: float = 60.0,
        ok: Callable[[int, bytes], bool] = lambda status, body: status == 200,
        watch: Sequence[ManagedProcess] | None = None,
    ) -> None:
        opener = _opener(ctx)

        def probe() -> bool:
            try:
                with opener.open(url, timeout=5) as r:
                    return ok(r.status, r.read())
            except urllib.error.HTTPError as e:
                return ok(e.code, e.read())

        self.wait_until(what, probe, timeout=timeout, watch=watch)

    def client_ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def ca_bundle_b64(self) -> str:
        """The test CA as webhook ``caBundle`` (it also signs ``pki/webhook.crt``)."""
        return base64.b64encode((self.pki / "ca.crt").read_bytes()).decode()

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; raises ControlPlaneError (with stderr) if ``check``."""
        argv = [self.kubectl_bin, f"--kubeconfig={self.kubeconfig}", *args]
        res = subprocess.run(argv, input=input, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and res.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stderr}{res.stdout}"
            )
        return res

    def get_json(self, *args: str) -> dict[str, object]:
        data: dict[str, object] = json.loads(self.kubectl("get", "-o", "json", *args).stdout)
        return data

    def apply(self, manifest: str | Path, *, server_side: bool = False) -> list[str]:
        """Apply a YAML/JSON manifest (text, file or directory); returns ``kind.group/name`` refs."""
        args = ["apply", "-o", "name"]
        if server_side:
            # CRDs can exceed the 256 KiB last-applied annotation that client-side apply writes.
            args += ["--server-side", "--force-conflicts", "--field-manager=e2e"]
        if isinstance(manifest, Path):
            args += ["-f", str(manifest)]
            if manifest.is_dir():
                args.append("--recursive")
            text = None
        else:
            args += ["-f", "-"]
            text = manifest
        out = self.kubectl(*args, input=text).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def apply_crds(self, *manifests: str | Path, timeout: float = 60.0) -> list[str]:
        """Apply CRD manifests and wait until every CRD in them is Established."""
        refs: list[str] = []
        for m in manifests:
            refs += self.apply(m, server_side=True)
        crds = [r for r in refs if r.startswith("customresourcedefinition")]
        self.wait_established(crds, timeout)
        return crds

    def wait_established(self, crds: Sequence[str], timeout: float = 60.0) -> None:
        """Wait until every CRD named (``customresourcedefinition.../name``) is Established.

        Not ``kubectl wait``: a new CRD's status holds ``conditions: null`` until the establishing
        controller runs, and kubectl wait fails on a null list instead of waiting.
        """
        if crds:
            self.wait_until(
                f"{len(crds)} CRDs Established",
                lambda: all(self._crd_established(ref) for ref in crds),
                timeout=timeout,
            )

    def _crd_established(self, ref: str) -> bool:
        jsonpath = '{.status.conditions[?(@.type=="Established")].status}'
        out = self.kubectl("get", ref, "-o", f"jsonpath={jsonpath}", check=False).stdout
        return out.strip() == "True"

    def create_namespace(self, name: str, timeout: float = 60.0) -> None:
        """Create a namespace and wait for its ``default`` ServiceAccount.

        The ServiceAccount admission plugin rejects pods until KCM has created it.
        """
        self.kubectl("create", "namespace", name)
        self.wait_for_default_serviceaccount(name, timeout)

    def wait_for_default_serviceaccount(self, namespace: str, timeout: float = 60.0) -> None:
        self.wait_until(
            f"serviceaccount default in {namespace}",
            lambda: (
                self.kubectl("get", "serviceaccount", "default", "-n", namespace, check=False).returncode == 0
            ),
            timeout=timeout,
            interval=0.3,
        )

    # ------------------------------------------------------------------ components
    def generate_pki(self) -> None:
        generate_pki(self.pki)

    def write_kubeconfig(self) -> None:
        self.write_client_kubeconfig(self.kubeconfig, "admin")

    def write_client_kubeconfig(self, path: Path, user: str) -> Path:
        """A kubeconfig for this apiserver that authenticates with ``user``'s client certificate."""
        # JSON is valid YAML, so no YAML library is needed.
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "e2e",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {"server": self.server, "certificate-authority": str(self.pki / "ca.crt")},
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate": str(self.pki / f"{user}.crt"),
                        "client-key": str(self.pki / f"{user}.key"),
                    },
                }
            ],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        }
        path.write_text(json.dumps(cfg, indent=1))
        return path

    def _bin(self, name: str) -> Path:
        path = self.bin_dir / name
        if not os.access(path, os.X_OK):
            raise ControlPlaneError(f"missing binary {path}; run hack/build-control-plane.sh")
        return path

    def start_etcd(self, timeout: float = 30.0) -> ManagedProcess:
        p = self.etcd_peer_port
        proc = self.start_process("etcd", [
            self._bin("etcd"), "--name=e2e", f"--data-dir={self.work_dir / 'etcd-data'}",
            f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{p}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{p}",
            f"--initial-cluster=e2e=http://127.0.0.1:{p}",
            # Test data is throwaway; fsync dominates apiserver latency on slow disks.
            "--unsafe-no-fsync=true", "--quota-backend-bytes=2147483648", "--log-level=warn",
        ])  # fmt: skip
        self.wait_http(
            "etcd /health",
            f"http://127.0.0.1:{self.etcd_port}/health",
            None,
            timeout,
            ok=lambda s, b: s == 200 and b'"true"' in b,
        )
        self.timings["etcd_ready"] = time.monotonic() - self._t0
        return proc

    def _gate_args(self) -> list[str]:
        if not self.feature_gates:
            return []
        gates = ",".join(f"{name}={str(on).lower()}" for name, on in sorted(self.feature_gates.items()))
        return [f"--feature-gates={gates}"]

    def start_apiserver(self, timeout: float = 120.0, extra_args: Sequence[str] = ()) -> ManagedProcess:
        pki = self.pki
        proc = self.start_process("kube-apiserver", [
            self._bin("kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            # Without a default route the apiserver cannot pick an advertise address by itself.
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.api_port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/12",
            f"--authorization-mode={self.authorization_mode}",
            # Loopback endpoints for the kubernetes Service fail validation and log errors forever.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true", "--profiling=false", "--v=1",
            *self._gate_args(),
            *([f"--runtime-config={','.join(self.runtime_config)}"] if self.runtime_config else []),
            *self.apiserver_args, *extra_args,
        ])  # fmt: skip
        self.write_kubeconfig()
        ctx = self.client_ssl_context()
        self.wait_http("kube-apiserver /readyz", f"{self.server}/readyz", ctx, timeout)
        self.timings["apiserver_ready"] = time.monotonic() - self._t0
        return proc

    def start_controller_manager(self, timeout: float = 60.0) -> ManagedProcess:
        kc = str(self.kubeconfig)
        proc = self.start_process("kube-controller-manager", [
            self._bin("kube-controller-manager"), f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1", f"--secure-port={self.kcm_port}",
            "--leader-elect=false",
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--controllers=*", "--v=1", *self._gate_args(),
        ])  # fmt: skip
        self.wait_http(
            "kube-controller-manager /healthz",
            f"https://127.0.0.1:{self.kcm_port}/healthz",
            _insecure_ctx(),
            timeout,
        )
        self.timings["controller_manager_ready"] = time.monotonic() - self._t0
        return proc

    def start_scheduler(self, timeout: float = 60.0) -> ManagedProcess:
        kc = str(self.kubeconfig)
        cfg = self.work_dir / "scheduler.json"
        cfg.write_text(
            json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": kc},
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        proc = self.start_process("kube-scheduler", [
            self._bin("kube-scheduler"), f"--config={cfg}",
            f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1", f"--secure-port={self.scheduler_port}", "--v=1",
            *self._gate_args(),
        ])  # fmt: skip
        self.wait_http(
            "kube-scheduler /healthz",
            f"https://127.0.0.1:{self.scheduler_port}/healthz",
            _insecure_ctx(),
            timeout,
        )
        self.timings["scheduler_ready"] = time.monotonic() - self._t0
        return proc

    def start_kwok(self) -> ManagedProcess:
        # The standalone kwok binary injects no default stages: the Stage file is mandatory.
        proc = self.start_process("kwok", [
            self._bin("kwok"), f"--kubeconfig={self.kubeconfig}", f"--config={self.kwok_stages}",
            "--manage-all-nodes=true", "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.0/16", "--node-ip=10.0.0.1",
        ])  # fmt: skip
        return proc

    def create_node(
        self,
        name: str = NODE_NAME,
        timeout: float = 60.0,
        pods: int = 250,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """A fake node with GPUs; kwok marks it Ready and KCM lifts the not-ready taint.

        ephemeral-storage must be declared: a node without it cannot fit any pod that requests some
        (the MPI launcher's kubectl-delivery init container asks for 5Gi).
        """
        resources = {
            "cpu": "64",
            "memory": "512Gi",
            "ephemeral-storage": "1Ti",
            "pods": str(pods),
            "nvidia.com/gpu": "8",
        }
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "type": "kwok",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    **(labels or {}),
                },
            },
            "status": {"capacity": resources, "allocatable": resources},
        }
        self.kubectl("create", "-f", "-", input=json.dumps(node))
        self.kubectl("wait", "--for=condition=Ready", f"node/{name}", f"--timeout={int(timeout)}s")

        def untainted() -> bool:
            spec = self.get_json(f"node/{name}").get("spec")
            taints = spec.get("taints", []) if isinstance(spec, dict) else []
            return not taints

        # The scheduler will not place pods while node.kubernetes.io/not-ready is still on the node.
        self.wait_until(f"node {name} untainted", untainted, timeout=timeout, interval=0.3)
        self.timings["node_ready"] = time.monotonic() - self._t0

    # ------------------------------------------------------------------ metacontroller
    def metacontroller_crds(self) -> Path:
        # Copied from the Metacontroller source by hack/build-control-plane.sh next to bin/.
        return self.bin_dir.parent / "manifests" / "metacontroller-crds-v1.yaml"

    def metacontroller_argv(self, extra_args: Sequence[str] = ()) -> tuple[list[str], int]:
        """The chart's Metacontroller flags with its listen addresses moved to free loopback ports.

        Returns the argv and the health port; ``extra_args`` override a chart flag of the same name.
        """
        health_port, metrics_port = free_ports(2)
        local = {
            "--health-probe-bind-address": f"127.0.0.1:{health_port}",
            "--metrics-address": f"127.0.0.1:{metrics_port}",
        }
        flags = {arg.split("=", 1)[0]: arg for arg in [*chart_metacontroller_args(), *extra_args]}
        flags.update({name: f"{name}={value}" for name, value in local.items()})
        self.metacontroller_metrics_port = metrics_port
        return [str(self.bin_dir / "metacontroller"), *flags.values()], health_port

    def start_metacontroller(
        self, extra_args: Sequence[str] = (), timeout: float = 60.0, kubeconfig: Path | None = None
    ) -> ManagedProcess:
        """Start the real Metacontroller out of cluster with the chart's flags; its CRDs must be installed.

        It reads ``KUBECONFIG`` (``kubeconfig``, default the admin's in ``self.env``) through
        controller-runtime. Hooks are then registered by applying CompositeController objects whose
        ``webhook.url`` points at a loopback gunicorn.
        """
        if missing_binaries(self.bin_dir, ["metacontroller"]):
            raise ControlPlaneError(
                f"metacontroller is missing from {self.bin_dir}: run hack/build-control-plane.sh"
            )
        argv, health_port = self.metacontroller_argv(extra_args)
        env = {"KUBECONFIG": str(kubeconfig)} if kubeconfig else None
        proc = self.start_process("metacontroller", argv, env=env)
        self.wait_http(
            "metacontroller /readyz", f"http://127.0.0.1:{health_port}/readyz", None, timeout, watch=[proc]
        )
        self.timings["metacontroller_ready"] = time.monotonic() - self._t0
        return proc

    # ------------------------------------------------------------------ orchestration
    def start(
        self, crds: Sequence[str | Path] = (), *, nodes: int = 1, metacontroller: bool = False
    ) -> ControlPlane:
        """Bring the whole plane up; on any failure tear down what was started and re-raise.

        CRDs are installed before KCM starts: its garbage collector discovers new resource
        types only every 30 s, so cascading deletion of CR children would otherwise lag.
        With ``metacontroller`` its CRDs are installed too and it is started last.
        """
        if metacontroller:
            crds = [*crds, self.metacontroller_crds()]
        self._t0 = time.monotonic()
        try:
            self.generate_pki()
            self.timings["pki"] = time.monotonic() - self._t0
            self.start_etcd()
            self.start_apiserver()
            if crds:
                self.apply_crds(*crds)
                self.timings["crds_established"] = time.monotonic() - self._t0
            self.start_controller_manager()
            self.start_scheduler()
            self.start_kwok()
            for i in range(nodes):
                self.create_node(f"kwok-node-{i}")
            self.wait_for_default_serviceaccount("default")
            if metacontroller:
                self.start_metacontroller()
            self.timings["total_startup"] = time.monotonic() - self._t0
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every started process in reverse start order (TERM, then KILL)."""
        while self.processes:
            proc = self.processes.pop()
            with contextlib.suppress(Exception):  # keep tearing down the rest
                proc.stop()

    def leftover_processes(self) -> list[str]:
        """Names of process groups still alive; teardown checks use this."""
        return [p.name for p in self.started if p.group_alive()]
