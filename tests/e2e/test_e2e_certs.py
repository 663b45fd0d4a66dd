"""The webhook server keeps its own certificate, on a real apiserver, with the install's own RBAC.

A control plane of its own: the install's webhook configurations go in under their real names
(trainop-mutate, trainop-validate) and with them the session stack's webhooks would be called twice. What
is installed is manifests/ as `kubectl apply --server-side -k` sends it: namespace, the webhooks'
ServiceAccount, Role, ClusterRole and bindings, Service, webhook configurations and admission policies;
only clientConfig becomes a loopback URL (kwok pods get no routable IPs) and each pod of the Deployment
is replaced by its two real processes: cert-rotator, run with the Deployment's own certificate settings
and a token of its ServiceAccount (`kubectl create token`), so every API call is checked against the
manifests' RBAC and admission policies; and the server, with no token, on the file the rotator writes.

Phases build on each other (module-scoped fixtures): first start -> restart -> a second replica -> the
Secret deleted and two servers racing for a new one -> the manifests re-applied, as an upgrade does ->
the configurations handed to Helm and upgraded -> the ServiceAccount deleted, as an uninstall does.
Re-applies happen while no server runs: a re-injection must not hide a re-apply that dropped caBundle.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, ManagedProcess, default_bin_dir, free_ports
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from trainop_stack import CRDS_DIR, PROBE_MESSAGE, REPO, job, replica

from webhooks import certs

pytestmark = pytest.mark.e2e

MANIFESTS = REPO / "manifests"
NAMESPACE, ACCOUNT, SECRET = "trainop-system", "trainop-webhooks", "trainop-webhook-cert"
CONFIGURATIONS = (
    ("mutatingwebhookconfiguration", "trainop-mutate"),
    ("validatingwebhookconfiguration", "trainop-validate"),
)
SERVICE_HOSTS = (f"{ACCOUNT}.{NAMESPACE}.svc", f"{ACCOUNT}.{NAMESPACE}.svc.cluster.local")
JOBS_NAMESPACE = "cert-jobs"
INVALID = job("XGBoostJob", "no-master", {"Worker": replica("XGBoostJob")})
VALID = job("XGBoostJob", "with-master", {"Master": replica("XGBoostJob")})
# The test servers re-check every 2 s instead of every minute, so re-injection is seen quickly.
CHECK_SECONDS = "2"


def installed_objects(url: str, timeout_seconds: int = 10) -> list[dict[str, Any]]:
    """manifests/ as kubectl would apply it, minus the Deployments and the generated job CRDs/RBAC (the
    admission policies included: every write of the server passes them).

    The webhook configurations call `url` instead of the Service; nothing else is changed.
    """
    docs = []
    for name in ("namespace.yaml", "webhooks.yaml", "webhookconfigurations.yaml", "admissionpolicies.yaml"):
        docs += [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]
    out = []
    for doc in docs:
        if doc["kind"] in ("Deployment", "PodDisruptionBudget"):
            continue
        for hook in doc.get("webhooks") or []:
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"]["url"] = url + service["path"]
            hook["timeoutSeconds"] = timeout_seconds
        out.append(doc)
    return out


def deployment_envs() -> tuple[dict[str, str], dict[str, str]]:
    """The trainop settings of the webhooks Deployment in manifests/webhooks.yaml: (cert-rotator, server)."""
    for doc in yaml.safe_load_all((MANIFESTS / "webhooks.yaml").read_text()):
        if doc and doc["kind"] == "Deployment":
            spec = doc["spec"]["template"]["spec"]
            [rotator], [server] = spec["initContainers"], spec["containers"]
            return tuple(  # type: ignore[return-value]
                {e["name"]: e["value"] for e in c["env"] if e["name"].startswith("TRAINOP_")}
                for c in (rotator, server)
            )
    raise AssertionError("no Deployment in manifests/webhooks.yaml")


@dataclass
class Pod:
    """One webhook pod: its cert-rotator, and the server once the rotator wrote the first certificate."""

    rotator: ManagedProcess
    port: int
    cert_dir: Path
    server: ManagedProcess | None = None


class Install:
    """The installed objects plus webhook server processes on loopback; see the module docstring."""

    def __init__(self, cp: ControlPlane, work: Path) -> None:
        self.cp = cp
        self.work = work
        [self.port] = free_ports(1)
        self.url = f"https://127.0.0.1:{self.port}"
        self.servers: list[Pod] = []
        self.count = 0

    def apply(self, timeout_seconds: int = 10) -> None:
        body = json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": installed_objects(self.url, timeout_seconds)}
        )
        # As a user installs and upgrades: server-side, kubectl's default field manager.
        self.cp.kubectl("apply", "--server-side", "-f", "-", input=body)

    def kubeconfig(self) -> Path:
        token = self.cp.kubectl("create", "token", ACCOUNT, "-n", NAMESPACE, "--duration=1h").stdout.strip()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "sa",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {
                        "server": self.cp.server,
                        "certificate-authority": str(self.cp.pki / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": ACCOUNT, "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": ACCOUNT}}],
        }
        path = self.work / "webhooks.kubeconfig"
        path.write_text(json.dumps(config))
        return path

    def start(self, port: int | None = None, wait: bool = True) -> tuple[ManagedProcess, int]:
        """One webhook pod as the Deployment runs it: its cert-rotator (the only process with the token),
        then, as the sidecar's startup probe lets the kubelet do, the server on the file it wrote.
        Returns the rotator and the server's port; `wait=False` leaves starting the server to
        `wait_listening`."""
        self.count += 1
        port = port or free_ports(1)[0]
        rotator_env, _ = deployment_envs()
        cert_dir = self.work / f"tls-{self.count}"
        env = {
            **rotator_env,
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            "TRAINOP_KUBECONFIG": str(self.kubeconfig()),
            "TRAINOP_WEBHOOK_CERT_DIR": str(cert_dir),
            "TRAINOP_WEBHOOK_CERT_HOSTS": "127.0.0.1",
            "TRAINOP_WEBHOOK_CERT_CHECK_SECONDS": CHECK_SECONDS,
        }
        argv = [sys.executable, "-m", "webhooks.certrotate"]
        rotator = self.cp.start_process(f"cert-rotator-{self.count}", argv, env=env, cwd=REPO)
        self.servers.append(Pod(rotator, port, cert_dir))
        if wait:
            self.wait_listening(rotator, port)
        return rotator, port

    def wait_listening(self, rotator: ManagedProcess, port: int) -> None:
        """Starts the pod's server once its rotator wrote the certificate; waits until it listens."""
        [pod] = [p for p in self.servers if p.rotator is rotator]
        pem = pod.cert_dir / "tls.pem"
        if pod.server is None:
            self.cp.wait_until(
                f"{pem} written",
                lambda: pem.is_file() and pem.stat().st_size > 0,
                timeout=60,
                watch=[rotator],
            )
            _, server_env = deployment_envs()
            env = {
                **server_env,
                "PYTHONPATH": str(REPO),
                "PYTHONUNBUFFERED": "1",
                "TRAINOP_TLS_CERT_FILE": str(pem),
                "TRAINOP_TLS_KEY_FILE": str(pem),
                "TRAINOP_WEBHOOK_BIND": f"127.0.0.1:{port}",
                "TRAINOP_WEBHOOK_WORKERS": "1",
                "TRAINOP_WEBHOOK_METRICS_BIND": "off",
            }
            argv = [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:webhooks.gunicorn_conf",
                "webhooks.app:app",
            ]
            pod.server = self.cp.start_process(f"webhooks-{self.count}", argv, env=env, cwd=REPO)

        def listening() -> bool:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True

        self.cp.wait_until(
            f"webhook server on port {port}", listening, timeout=60, watch=[rotator, pod.server]
        )

    def stop_all(self) -> None:
        while self.servers:
            pod = self.servers.pop()
            if pod.server is not None:
                self.cp.stop_process(pod.server)
            self.cp.stop_process(pod.rotator)

    def get(self, *args: str) -> dict[str, Any]:
        return dict(self.cp.get_json(*args))

    def secret(self) -> dict[str, Any]:
        return self.get("secret", SECRET, "-n", NAMESPACE)

    def secret_ca(self) -> bytes:
        return base64.b64decode(self.secret()["data"]["ca.crt"])

    def bundles(self) -> list[bytes]:
        out = []
        for kind, name in CONFIGURATIONS:
            config = self.get(kind, name)
            out += [base64.b64decode(h["clientConfig"].get("caBundle", "")) for h in config["webhooks"]]
        return out

    def dry_run(self, obj: dict[str, Any]) -> Any:
        return self.cp.kubectl(
            "create",
            "--dry-run=server",
            "-o",
            "json",
            "-n",
            JOBS_NAMESPACE,
            "-f",
            "-",
            input=json.dumps(obj),
            check=False,
        )

    def assert_webhooks_answer(self) -> None:
        denied = self.dry_run(INVALID)
        assert denied.returncode != 0, denied.stdout
        assert 'admission webhook "validate.trainop.kubeflow.org" denied the request' in denied.stderr, (
            denied.stderr
        )
        assert PROBE_MESSAGE in denied.stderr
        admitted = self.dry_run(VALID)
        assert admitted.returncode == 0, admitted.stderr
        assert json.loads(admitted.stdout)["spec"]["runPolicy"]["cleanPodPolicy"], (
            "defaulted by the mutating webhook"
        )


def served_certificate(port: int) -> x509.Certificate:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def trusted_by(port: int, ca_pem: bytes, hostname: str) -> bool:
    """A handshake that verifies the chain to `ca_pem` and the host name, as the apiserver does."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname=hostname),
    ):
        return True


def wait_for(what: str, check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(default_bin_dir(), tmp_path_factory.mktemp("certs-cp"))
    try:
        cp.start(crds=[CRDS_DIR])
        cp.create_namespace(JOBS_NAMESPACE)
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def install(cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    inst = Install(cluster, tmp_path_factory.mktemp("certs"))
    inst.apply()
    try:
        yield inst
    finally:
        inst.stop_all()


@pytest.fixture(scope="module")
def first(install: Install) -> tuple[dict[str, Any], int]:
    """The first server of the install: (the Secret it made, its port)."""
    assert install.cp.kubectl("get", "secret", SECRET, "-n", NAMESPACE, check=False).returncode != 0
    assert install.dry_run(INVALID).returncode != 0  # failurePolicy Fail and nobody serving yet
    _, port = install.start(install.port)
    return install.secret(), port


def test_the_first_server_creates_the_secret(first: tuple[dict[str, Any], int]) -> None:
    secret, _ = first
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}


def test_the_secret_is_owned_by_the_service_account(
    install: Install, first: tuple[dict[str, Any], int]
) -> None:
    secret, _ = first
    account = install.get("serviceaccount", ACCOUNT, "-n", NAMESPACE)
    [owner] = secret["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "ServiceAccount",
        ACCOUNT,
        account["metadata"]["uid"],
    )


def test_the_served_certificate_chains_to_the_secrets_ca_for_every_name(
    install: Install, first: tuple[dict[str, Any], int]
) -> None:
    secret, port = first
    ca = base64.b64decode(secret["data"]["ca.crt"])
    assert served_certificate(port).public_bytes(Encoding.PEM) == base64.b64decode(secret["data"]["tls.crt"])
    for host in (*SERVICE_HOSTS, "127.0.0.1"):
        assert trusted_by(port, ca, host)


def test_the_ca_is_injected_into_every_webhook(install: Install, first: tuple[dict[str, Any], int]) -> None:
    secret, _ = first
    assert install.bundles() == [base64.b64decode(secret["data"]["ca.crt"])] * 2
    config = install.get("validatingwebhookconfiguration", "trainop-validate", "--show-managed-fields")
    fields = config["metadata"]["managedFields"]
    owners = [m["manager"] for m in fields if "caBundle" in json.dumps(m.get("fieldsV1"))]
    assert owners == ["trainop-webhooks"]


def test_the_apiserver_calls_the_webhooks_through_the_injected_ca(
    install: Install, first: tuple[dict[str, Any], int]
) -> None:
    install.assert_webhooks_answer()


@pytest.fixture(scope="module")
def restarted(install: Install, first: tuple[dict[str, Any], int]) -> tuple[dict[str, Any], int]:
    install.stop_all()
    _, port = install.start(install.port)
    return install.secret(), port


def test_a_restarted_server_keeps_the_certificate(
    first: tuple[dict[str, Any], int], restarted: tuple[dict[str, Any], int], install: Install
) -> None:
    (before, _), (after, port) = first, restarted
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert served_certificate(port).public_bytes(Encoding.PEM) == base64.b64decode(before["data"]["tls.crt"])
    assert install.bundles() == [base64.b64decode(before["data"]["ca.crt"])] * 2
    install.assert_webhooks_answer()


def test_a_second_replica_serves_the_same_certificate(
    install: Install, restarted: tuple[dict[str, Any], int]
) -> None:
    secret, port = restarted
    _, second = install.start()
    assert served_certificate(second) == served_certificate(port)
    assert install.secret()["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]


@pytest.fixture(scope="module")
def raced(install: Install, restarted: tuple[dict[str, Any], int]) -> tuple[bytes, list[int]]:
    """Every server stopped, the Secret deleted, then two servers started at once: (old CA, their ports)."""
    old_ca = install.secret_ca()
    install.stop_all()
    install.cp.kubectl("delete", "secret", SECRET, "-n", NAMESPACE)
    started = [install.start(install.port, wait=False), install.start(wait=False)]
    for proc, port in started:
        install.wait_listening(proc, port)
    return old_ca, [port for _, port in started]


def test_two_servers_racing_for_a_new_secret_converge_on_one(
    install: Install, raced: tuple[bytes, list[int]]
) -> None:
    old_ca, ports = raced
    secret = install.secret()
    new_ca = base64.b64decode(secret["data"]["ca.crt"])
    assert new_ca != old_ca
    served = {served_certificate(p).public_bytes(Encoding.PEM) for p in ports}
    assert served == {base64.b64decode(secret["data"]["tls.crt"])}
    # The replaced CA stays trusted beside the new one for the grace period: replicas that have not
    # re-read the Secret yet still serve a certificate of the old one.
    for bundle in install.bundles():
        assert [c.public_bytes(Encoding.PEM) for c in certs.pem_certificates(bundle)] == [new_ca, old_ca]
    install.assert_webhooks_answer()


@pytest.fixture(scope="module")
def reapplied(install: Install, raced: tuple[bytes, list[int]]) -> tuple[list[bytes], dict[str, Any]]:
    """The manifests applied again while no server runs, with a changed value as an upgrade brings one."""
    before = install.bundles(), install.secret()
    install.stop_all()
    install.apply(timeout_seconds=7)
    return before


def test_re_applying_the_manifests_keeps_the_ca_bundle_and_the_secret(
    install: Install, reapplied: tuple[list[bytes], dict[str, Any]]
) -> None:
    bundles, secret = reapplied
    config = install.get("validatingwebhookconfiguration", "trainop-validate")
    assert [h["timeoutSeconds"] for h in config["webhooks"]] == [7]
    assert install.bundles() == bundles
    assert install.secret()["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]


def test_after_the_re_apply_a_server_answers_without_writing(
    install: Install, reapplied: tuple[list[bytes], dict[str, Any]]
) -> None:
    _, secret = reapplied
    install.start(install.port)
    install.assert_webhooks_answer()
    assert install.secret()["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]


def test_a_re_created_configuration_is_injected_again(
    install: Install, reapplied: tuple[list[bytes], dict[str, Any]]
) -> None:
    if not install.servers:
        install.start(install.port)
    install.cp.kubectl("delete", "validatingwebhookconfiguration", "trainop-validate")
    install.apply()
    ca = install.secret_ca()
    wait_for("caBundle re-injected", lambda: install.bundles()[-1].startswith(ca))
    install.assert_webhooks_answer()


def helm_chart(directory: Path, url: str) -> Path:
    """A chart of just the two webhook configurations of manifests/, timeoutSeconds a value."""
    configs = [d for d in installed_objects(url, timeout_seconds=-1) if "Webhook" in d["kind"]]
    template = "---\n".join(yaml.safe_dump(c) for c in configs).replace(
        "timeoutSeconds: -1", "timeoutSeconds: {{ .Values.timeoutSeconds }}"
    )
    (directory / "templates").mkdir(parents=True)
    (directory / "templates" / "webhookconfigurations.yaml").write_text(template)
    (directory / "Chart.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v2", "name": "certs-e2e", "version": "0.1.0"})
    )
    (directory / "values.yaml").write_text("timeoutSeconds: 10\n")
    return directory


@pytest.fixture(scope="module")
def helm_upgraded(install: Install, reapplied: tuple[list[bytes], dict[str, Any]]) -> list[bytes]:
    """The configurations handed to Helm, injected by a server, then `helm upgrade` while no server runs.

    Returns the CA bundles just before the upgrade.
    """
    install.stop_all()
    for kind, name in CONFIGURATIONS:
        install.cp.kubectl("delete", kind, name)
    chart = helm_chart(install.work / "chart", install.url)

    def helm(*args: str) -> None:
        argv = [
            str(install.cp.bin_dir / "helm"),
            "--kubeconfig",
            str(install.cp.kubeconfig),
            *args,
            "-n",
            NAMESPACE,
        ]
        done = subprocess.run(
            argv, capture_output=True, text=True, env=install.cp.env, timeout=120, check=False
        )
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"

    helm("install", "certs-e2e", str(chart))
    install.start(install.port)
    before = install.bundles()
    install.stop_all()
    helm("upgrade", "certs-e2e", str(chart), "--set", "timeoutSeconds=5")
    return before


def test_helm_upgrade_keeps_the_injected_ca_bundle(install: Install, helm_upgraded: list[bytes]) -> None:
    """Helm 3's three-way merge removes only what the previous release rendered; caBundle never was."""
    assert all(helm_upgraded)
    config = install.get("validatingwebhookconfiguration", "trainop-validate")
    assert [h["timeoutSeconds"] for h in config["webhooks"]] == [5]
    assert install.bundles() == helm_upgraded


def test_deleting_the_service_account_deletes_the_secret(
    install: Install, reapplied: tuple[list[bytes], dict[str, Any]]
) -> None:
    """What uninstalling (helm uninstall, kubectl delete -k) does to the Secret no template owns."""
    install.stop_all()
    install.cp.kubectl("delete", "serviceaccount", ACCOUNT, "-n", NAMESPACE)

    def gone() -> bool:
        return install.cp.kubectl("get", "secret", SECRET, "-n", NAMESPACE, check=False).returncode != 0

    wait_for("the garbage collector to delete the Secret", gone, timeout=90)
