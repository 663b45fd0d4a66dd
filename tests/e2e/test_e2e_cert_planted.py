"""A Secret planted under the webhook certificate's name before the first start, on a real apiserver.

Whatever CA that Secret holds would be served and injected into both caBundles, making the apiserver
(and anyone trusting the bundle) accept a server holding the planter's key. The install is the one of
test_e2e_certs.py (manifests/ with their RBAC and admission policies, the real server run with a
ServiceAccount token), on a control plane of its own. Once installed, the admission policy lets nobody
but the webhook ServiceAccount write that Secret, so it is planted in the namespace just before the
install, with the labels and the annotation copied from the source; it cannot carry an owner reference
to the ServiceAccount that the install then creates under a uid of its own, and the server refuses it:
it logs `secret-refused`, does not listen and injects nothing. Deleting the Secret, the fix the log line
names, lets it start with a CA of its own.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from controlplane import ControlPlane, default_bin_dir
from cryptography.hazmat.primitives.serialization import Encoding
from test_e2e_certs import JOBS_NAMESPACE, NAMESPACE, SECRET, SERVICE_HOSTS, Install, served_certificate
from trainop_stack import CRDS_DIR

from webhooks import certs, selfcert

pytestmark = pytest.mark.e2e


def planted_secret() -> tuple[dict[str, Any], bytes]:
    """A namespace admin's Secret: their own CA and a serving certificate for our names. Returns it and
    the CA's PEM."""
    ca = certs.issue_ca(datetime.now(UTC))
    serving = certs.issue_serving(ca, (*SERVICE_HOSTS, "127.0.0.1"), datetime.now(UTC))
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": SECRET,
            "namespace": NAMESPACE,
            "labels": dict(selfcert.LABELS),
            "annotations": {selfcert.MARK: selfcert.MARK_VALUE},
        },
        "data": selfcert.Material(ca, serving).secret_data(),
    }
    return secret, ca.cert_pem


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Install, bytes]]:
    """The install, with the Secret planted in its namespace just before; and the planted CA."""
    cp = ControlPlane(default_bin_dir(), tmp_path_factory.mktemp("planted-cp"))
    try:
        cp.start(crds=[CRDS_DIR])
        cp.create_namespace(JOBS_NAMESPACE)
        cp.create_namespace(NAMESPACE)
        secret, planted_ca = planted_secret()
        cp.kubectl("apply", "-f", "-", input=json.dumps(secret))
        inst = Install(cp, tmp_path_factory.mktemp("planted"))
        inst.apply()
        try:
            yield inst, planted_ca
        finally:
            inst.stop_all()
    finally:
        cp.stop()


def test_once_installed_nobody_but_the_webhook_account_may_rewrite_the_secret(
    planted: tuple[Install, bytes],
) -> None:
    install, _ = planted
    body = json.dumps(planted_secret()[0])
    denial = f"may create or update the webhook certificate Secret {SECRET}"

    def denied(*dry_run: str) -> bool:
        res = install.cp.kubectl("apply", *dry_run, "-f", "-", input=body, check=False)
        return res.returncode != 0 and denial in res.stderr

    # The apiserver enforces a new policy once its informer has it, a moment after the create.
    install.cp.wait_until(
        "the Secret's admission policy in force", lambda: denied("--dry-run=server"), timeout=30
    )
    assert denied()


def test_a_planted_certificate_secret_is_refused_until_deleted(planted: tuple[Install, bytes]) -> None:
    install, planted_ca = planted
    before = install.secret()["metadata"]["resourceVersion"]
    proc, port = install.start(install.port, wait=False)

    def refused() -> bool:
        return "secret-refused" in proc.log_path.read_text(errors="replace")

    install.cp.wait_until("the server to refuse the planted Secret", refused, timeout=60, watch=[proc])
    # Refused at start-up: no certificate file, so no server (the pod is unready), and nothing written.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    assert install.secret()["metadata"]["resourceVersion"] == before
    assert all(planted_ca not in bundle for bundle in install.bundles())

    install.cp.kubectl("delete", "secret", SECRET, "-n", NAMESPACE)
    install.wait_listening(proc, port)
    ours = install.secret()
    ca = base64.b64decode(ours["data"]["ca.crt"])
    assert ca != planted_ca
    assert install.bundles() == [ca] * 2
    assert served_certificate(port).public_bytes(Encoding.PEM) == base64.b64decode(ours["data"]["tls.crt"])
    install.assert_webhooks_answer()
