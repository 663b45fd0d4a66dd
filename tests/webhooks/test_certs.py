"""The webhook's own certificate: the PKI functions, and `CertKeeper.sync` against an in-memory apiserver.

The in-memory apiserver (`MemoryApi`) keeps the two behaviours the keeper relies on: resourceVersion
preconditions (409 on a stale write, 409 on creating what exists) and a strategic merge of `webhooks`
keyed by name. tests/e2e/test_e2e_certs.py runs the same code against the real apiserver.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import socket
import ssl
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from trainop import kubeclient
from trainop.jsontypes import Json
from trainop.kubeclient import ApiError
from webhooks import certs, selfcert
from webhooks.certs import KeyPair
from webhooks.selfcert import CertKeeper, CertSettings, Material

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOSTS = (
    "trainop-webhooks.trainop-system.svc",
    "trainop-webhooks.trainop-system.svc.cluster.local",
    "127.0.0.1",
)
SECRET_PATH = "/api/v1/namespaces/trainop-system/secrets/trainop-webhook-cert"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/trainop-mutate"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/trainop-validate"


# ---------------------------------------------------------------------------------------------- PKI


@pytest.fixture(scope="module")
def ca() -> KeyPair:
    return certs.issue_ca(T0)


@pytest.fixture(scope="module")
def serving(ca: KeyPair) -> KeyPair:
    return certs.issue_serving(ca, HOSTS, T0)


def test_a_fresh_ca_is_usable_for_its_lifetime(ca: KeyPair) -> None:
    assert certs.ca_problem(ca, T0, T0 + certs.CA_LIFETIME) is None
    constraints = ca.certificate().extensions.get_extension_for_class(x509.BasicConstraints).value
    assert (constraints.ca, constraints.path_length) == (True, 0)


def test_a_fresh_serving_certificate_names_every_host_and_chains_to_its_ca(
    ca: KeyPair, serving: KeyPair
) -> None:
    assert certs.serving_problem(serving, ca, HOSTS, T0, T0 + certs.SERVING_LIFETIME) is None
    eku = serving.certificate().extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]


def test_certificates_are_backdated_for_clock_skew(ca: KeyPair, serving: KeyPair) -> None:
    for pair in (ca, serving):
        assert pair.certificate().not_valid_before_utc == T0 - certs.CLOCK_SKEW


def test_a_tls_client_trusting_only_the_ca_accepts_the_key_and_certificate_file(tmp_path: Path) -> None:
    now = datetime.now(UTC)  # a real handshake checks against the real clock
    ca = certs.issue_ca(now)
    pair = certs.issue_serving(ca, HOSTS, now)
    pem_file = tmp_path / "tls.pem"
    pem_file.write_bytes(pair.key_pem + pair.cert_pem)  # what the keeper writes for gunicorn
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(pem_file))
    for host in HOSTS:
        assert handshake(server_ctx, ca, host) == pair.certificate().public_bytes(Encoding.DER)


def test_a_serving_certificate_never_outlives_its_ca() -> None:
    short_ca = certs.issue_ca(T0, lifetime=timedelta(days=30))
    pair = certs.issue_serving(short_ca, HOSTS, T0)
    assert pair.certificate().not_valid_after_utc == short_ca.certificate().not_valid_after_utc


def test_a_serving_certificate_needs_a_host() -> None:
    with pytest.raises(ValueError, match="at least one host"):
        certs.issue_serving(certs.issue_ca(T0), (), T0)


def test_a_missing_host_is_named(ca: KeyPair, serving: KeyPair) -> None:
    problem = certs.serving_problem(serving, ca, (*HOSTS, "extra.example", "10.0.0.1"), T0, T0)
    assert problem == "the serving certificate does not name 10.0.0.1, extra.example"


def test_host_names_compare_case_insensitively(ca: KeyPair, serving: KeyPair) -> None:
    assert certs.serving_problem(serving, ca, (HOSTS[0].upper(),), T0, T0) is None


def test_a_certificate_expiring_before_the_horizon_is_reported(ca: KeyPair, serving: KeyPair) -> None:
    horizon = T0 + certs.SERVING_LIFETIME + timedelta(days=1)
    assert "expires at" in (certs.serving_problem(serving, ca, HOSTS, T0, horizon) or "")
    assert "expires at" in (certs.ca_problem(ca, T0, T0 + certs.CA_LIFETIME + timedelta(days=1)) or "")


def test_a_certificate_from_another_ca_is_reported(serving: KeyPair) -> None:
    other = certs.issue_ca(T0, name="other-ca")
    assert (
        certs.serving_problem(serving, other, HOSTS, T0, T0)
        == "the serving certificate is not signed by the CA"
    )


def test_a_certificate_with_another_key_is_reported(ca: KeyPair, serving: KeyPair) -> None:
    swapped = KeyPair(serving.cert_pem, certs.issue_serving(ca, HOSTS, T0).key_pem)
    assert certs.serving_problem(swapped, ca, HOSTS, T0, T0) == "the serving certificate has another key"


def test_a_leaf_is_not_accepted_as_ca(ca: KeyPair, serving: KeyPair) -> None:
    assert certs.ca_problem(serving, T0, T0) == "the CA certificate is not a CA"


def test_garbage_is_reported_not_raised(ca: KeyPair) -> None:
    garbage = KeyPair(b"not a certificate", b"not a key")
    assert (certs.ca_problem(garbage, T0, T0) or "").startswith("the CA does not parse")
    assert (certs.serving_problem(garbage, ca, HOSTS, T0, T0) or "").startswith(
        "the serving certificate does not parse"
    )


# ---------------------------------------------------------------------------------------------- keeper


class MemoryApi:
    """The few apiserver behaviours the keeper depends on, and a way to race one of its writes."""

    def __init__(self) -> None:
        self.objects: dict[str, Json] = {}
        self.version = 0
        self.writes: list[tuple[str, str]] = []
        # (method, path, action): run `action` once, just before that write, as a concurrent replica would.
        self.race: tuple[str, str, Callable[[], object]] | None = None
        self.lock = threading.Lock()
        # Who the SelfSubjectReview says is asking, or the error it fails with.
        self.user: Json = {
            "username": "system:serviceaccount:trainop-system:trainop-webhooks",
            "uid": "sa-uid",
        }
        self.review_error: ApiError | None = None

    def put_object(self, path: str, obj: Json) -> None:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[path] = obj

    def get(self, path: str) -> Json | None:
        obj = self.objects.get(path)
        return copy.deepcopy(obj) if obj is not None else None

    def request(
        self, method: str, path: str, body: Json | None = None, content_type: str | None = None
    ) -> Json:
        assert body is not None
        if self.race is not None and self.race[:2] == (method, path):
            action, self.race = self.race[2], None
            action()
        with self.lock:
            response = self._write(method, path, body, content_type)
            self.writes.append((method, path))
            return response

    def _write(self, method: str, path: str, body: Json, content_type: str | None) -> Json:
        if method == "POST" and path.endswith("/selfsubjectreviews"):
            if self.review_error is not None:
                raise self.review_error
            return {"status": {"userInfo": dict(self.user)}}
        if method == "POST":
            target = f"{path}/{body['metadata']['name']}"
            if target in self.objects:
                raise ApiError(method, path, 409, "already exists")
            self.put_object(target, body)
            return self.objects[target]
        current = self.objects.get(path)
        if current is None:
            raise ApiError(method, path, 404, "not found")
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(method, path, 409, "the object has been modified")
        if method == "PUT":
            self.put_object(path, body)
        elif method == "PATCH":
            assert content_type == "application/strategic-merge-patch+json"
            merged = copy.deepcopy(current)
            hooks = {h["name"]: h for h in merged["webhooks"]}
            for change in body["webhooks"]:
                hooks[change["name"]].setdefault("clientConfig", {}).update(change["clientConfig"])
            self.put_object(path, merged)
        return self.objects[path]

    def write_count(self, method: str) -> int:
        return sum(1 for m, p in self.writes if m == method and not p.endswith("selfsubjectreviews"))

    def state_writes(self) -> int:
        """Writes that change something (a SelfSubjectReview only asks who we are)."""
        return sum(1 for _, p in self.writes if not p.endswith("selfsubjectreviews"))


def webhook_configuration(kind: str, name: str, hooks: int = 1) -> Json:
    return {
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"{name}-{i}.trainop.kubeflow.org",
                "clientConfig": {"service": {"name": "trainop-webhooks"}},
            }
            for i in range(hooks)
        ],
    }


@pytest.fixture
def api() -> MemoryApi:
    memory = MemoryApi()
    memory.put_object(MUTATING, webhook_configuration("MutatingWebhookConfiguration", "trainop-mutate"))
    memory.put_object(
        VALIDATING, webhook_configuration("ValidatingWebhookConfiguration", "trainop-validate", hooks=2)
    )
    return memory


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def settings(tmp_path: Path, replica: str = "a") -> CertSettings:
    return CertSettings(
        namespace="trainop-system",
        secret="trainop-webhook-cert",
        service="trainop-webhooks",
        extra_hosts=("127.0.0.1",),
        mutating=("trainop-mutate",),
        validating=("trainop-validate",),
        cert_dir=tmp_path / replica,
        check_interval=60,
    )


def keeper(api: MemoryApi, tmp_path: Path, clock: Clock, replica: str = "a") -> CertKeeper:
    return CertKeeper(api, settings(tmp_path, replica), clock)


def bundles(api: MemoryApi) -> list[bytes]:
    return [
        base64.b64decode(h["clientConfig"].get("caBundle", ""))
        for path in (MUTATING, VALIDATING)
        for h in api.objects[path]["webhooks"]
    ]


def stored(api: MemoryApi) -> Material:
    material = Material.from_secret(api.objects[SECRET_PATH])
    assert material is not None
    return material


def test_the_first_sync_creates_the_secret_writes_the_certificate_and_injects_the_ca(
    api: MemoryApi, tmp_path: Path
) -> None:
    served = keeper(api, tmp_path, Clock(T0)).sync()
    secret = api.objects[SECRET_PATH]
    assert secret["type"] == "kubernetes.io/tls"
    assert stored(api) == served
    assert certs.serving_problem(served.serving, served.ca, HOSTS, T0, T0) is None
    assert (tmp_path / "a" / "tls.pem").read_bytes() == served.serving.key_pem + served.serving.cert_pem
    assert bundles(api) == [served.ca.cert_pem] * 3  # every webhook of both configurations


def test_the_secret_is_owned_by_the_service_account_so_uninstalling_removes_it(
    api: MemoryApi, tmp_path: Path
) -> None:
    keeper(api, tmp_path, Clock(T0)).sync()
    [owner] = api.objects[SECRET_PATH]["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "name": "trainop-webhooks",
        "uid": "sa-uid",
    }


def test_another_replica_serves_the_same_certificate_without_writing(api: MemoryApi, tmp_path: Path) -> None:
    first = keeper(api, tmp_path, Clock(T0), "a").sync()
    writes = api.state_writes()
    second = keeper(api, tmp_path, Clock(T0 + timedelta(minutes=1)), "b").sync()
    assert second == first
    assert api.state_writes() == writes
    assert (tmp_path / "b" / "tls.pem").read_bytes() == (tmp_path / "a" / "tls.pem").read_bytes()


def test_a_repeated_sync_writes_nothing(api: MemoryApi, tmp_path: Path) -> None:
    k = keeper(api, tmp_path, Clock(T0))
    k.sync()
    writes, mtime = len(api.writes), (tmp_path / "a" / "tls.pem").stat().st_mtime_ns
    k.sync()
    assert len(api.writes) == writes
    assert (tmp_path / "a" / "tls.pem").stat().st_mtime_ns == mtime


def test_losing_the_create_race_serves_the_winners_secret(api: MemoryApi, tmp_path: Path) -> None:
    winner = keeper(api, tmp_path, Clock(T0), "winner")
    api.race = ("POST", SECRET_PATH.rpartition("/")[0], winner.ensure_secret)
    loser = keeper(api, tmp_path, Clock(T0), "loser").sync()
    assert loser == stored(api)
    assert api.write_count("POST") == 1  # only the winner's create landed


def test_losing_the_renewal_race_serves_the_winners_renewal(api: MemoryApi, tmp_path: Path) -> None:
    original = keeper(api, tmp_path, Clock(T0)).sync()
    late = Clock(T0 + certs.SERVING_LIFETIME - timedelta(days=30))
    winner = keeper(api, tmp_path, late, "winner")
    api.race = ("PUT", SECRET_PATH, winner.ensure_secret)
    loser = keeper(api, tmp_path, late, "loser").sync()
    assert loser == stored(api)
    assert loser.serving != original.serving
    assert api.write_count("PUT") == 1


def test_a_serving_certificate_close_to_expiry_is_renewed_with_the_same_ca(
    api: MemoryApi, tmp_path: Path
) -> None:
    clock = Clock(T0)
    k = keeper(api, tmp_path, clock)
    original = k.sync()
    clock.now = T0 + certs.SERVING_LIFETIME * 2 / 3 - timedelta(days=1)
    assert k.sync() == original  # a third of its life left: not yet
    clock.now += timedelta(days=2)
    renewed = k.sync()
    assert renewed.ca == original.ca
    assert renewed.serving != original.serving
    assert (
        certs.serving_problem(renewed.serving, renewed.ca, HOSTS, clock.now, clock.now + timedelta(days=300))
        is None
    )
    assert bundles(api) == [original.ca.cert_pem] * 3  # the CA did not change: nothing to inject


def test_a_new_host_reissues_the_serving_certificate_only(api: MemoryApi, tmp_path: Path) -> None:
    original = keeper(api, tmp_path, Clock(T0)).sync()
    wider = CertKeeper(
        api, CertSettings(**{**settings(tmp_path).__dict__, "extra_hosts": ("127.0.0.1", "::1")}), Clock(T0)
    )
    renewed = wider.sync()
    assert renewed.ca == original.ca
    assert certs.serving_problem(renewed.serving, renewed.ca, (*HOSTS, "::1"), T0, T0) is None


def test_a_secret_made_by_cert_manager_is_taken_over_when_told_to_adopt_it(
    api: MemoryApi, tmp_path: Path
) -> None:
    other = certs.issue_ca(T0)
    pair = certs.issue_serving(other, HOSTS, T0)
    data = {"tls.crt": pair.cert_pem, "tls.key": pair.key_pem, "ca.crt": other.cert_pem}  # no ca.key
    api.put_object(SECRET_PATH, {
        "kind": "Secret", "type": "kubernetes.io/tls", "metadata": {"name": "trainop-webhook-cert"},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    })  # fmt: skip
    served = adopting_keeper(api, tmp_path, Clock(T0)).sync()
    assert served.ca != other
    assert stored(api) == served
    assert api.objects[SECRET_PATH]["type"] == "kubernetes.io/tls"
    assert keeper(api, tmp_path, Clock(T0), "b").sync() == served  # ours from now on


# ----------------------------------------------------------------------------------- a Secret we did not make

ATTACKER_CA = certs.issue_ca(T0, name="trainop-webhook-ca")


def planted_secret(**metadata: Any) -> Json:
    """What a namespace admin can create before the first start: their own CA and serving certificate
    for our names, with whatever labels and annotations they copy from the source."""
    pair = certs.issue_serving(ATTACKER_CA, HOSTS, T0)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "trainop-webhook-cert", "namespace": "trainop-system", **metadata},
        "data": Material(ATTACKER_CA, pair).secret_data(),
    }


COPIED_MARKS = {"labels": dict(selfcert.LABELS), "annotations": {selfcert.MARK: selfcert.MARK_VALUE}}


def adopting_keeper(api: MemoryApi, tmp_path: Path, clock: Clock, replica: str = "a") -> CertKeeper:
    return CertKeeper(api, CertSettings(**{**settings(tmp_path, replica).__dict__, "adopt": True}), clock)


def test_a_created_secret_carries_the_mark_and_the_owner_reference(api: MemoryApi, tmp_path: Path) -> None:
    keeper(api, tmp_path, Clock(T0)).sync()
    meta = api.objects[SECRET_PATH]["metadata"]
    assert meta["annotations"] == {"trainop/webhook-certificate": "self-managed"}
    assert [r["uid"] for r in meta["ownerReferences"]] == ["sa-uid"]


@pytest.mark.parametrize("marks", [{}, COPIED_MARKS], ids=["bare", "with-copied-marks"])
def test_a_planted_secret_is_refused_and_its_ca_neither_served_nor_injected(
    api: MemoryApi, tmp_path: Path, marks: Json, caplog: pytest.LogCaptureFixture
) -> None:
    api.put_object(SECRET_PATH, planted_secret(**copy.deepcopy(marks)))
    before = copy.deepcopy(api.objects[SECRET_PATH])
    with pytest.raises(selfcert.ForeignSecret, match="is not owned by ServiceAccount trainop-webhooks"):
        keeper(api, tmp_path, Clock(T0)).sync()
    assert not (tmp_path / "a" / "tls.pem").exists()
    assert bundles(api) == [b""] * 3
    assert api.objects[SECRET_PATH] == before
    [refused] = [json.loads(r.getMessage()) for r in caplog.records if "secret-refused" in r.getMessage()]
    assert caplog.records[-1].levelname == "ERROR"
    assert refused["fix"] == (
        "delete the Secret to have a new one issued, or set TRAINOP_WEBHOOK_CERT_ADOPT=true to take it over"
    )


def test_a_secret_owned_by_another_service_account_is_refused(api: MemoryApi, tmp_path: Path) -> None:
    other = {"apiVersion": "v1", "kind": "ServiceAccount", "name": "trainop-webhooks", "uid": "old-uid"}
    api.put_object(SECRET_PATH, planted_secret(ownerReferences=[other], **copy.deepcopy(COPIED_MARKS)))
    with pytest.raises(
        selfcert.ForeignSecret, match=r"not owned by ServiceAccount trainop-webhooks \(uid sa-uid\)"
    ):
        keeper(api, tmp_path, Clock(T0)).sync()


def test_the_server_does_not_listen_until_a_planted_secret_is_deleted(
    api: MemoryApi, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """start_up is what gunicorn's master runs before it binds the port: until it returns, the pod is
    not ready. Deleting the planted Secret is the fix the log line names."""
    api.put_object(SECRET_PATH, planted_secret())
    rotator = selfcert.Rotator(keeper(api, tmp_path, Clock(T0)))
    timer = threading.Timer(0.5, lambda: api.objects.pop(SECRET_PATH))
    timer.start()
    served = rotator.start_up(retry_max=0.2)
    assert served.ca != ATTACKER_CA
    assert bundles(api) == [served.ca.cert_pem] * 3
    retries = [json.loads(r.getMessage()) for r in caplog.records if "start-up-retry" in r.getMessage()]
    assert retries and all("is not owned by ServiceAccount" in r["error"] for r in retries)


def test_a_running_server_whose_secret_is_replaced_by_a_planted_one_keeps_its_own(
    api: MemoryApi, tmp_path: Path
) -> None:
    k = keeper(api, tmp_path, Clock(T0))
    ours = k.sync()
    served_file = (tmp_path / "a" / "tls.pem").read_bytes()
    del api.objects[SECRET_PATH]
    api.put_object(SECRET_PATH, planted_secret(**copy.deepcopy(COPIED_MARKS)))
    with pytest.raises(selfcert.ForeignSecret):
        k.sync()
    assert (tmp_path / "a" / "tls.pem").read_bytes() == served_file
    assert bundles(api) == [ours.ca.cert_pem] * 3


def test_our_secret_whose_ca_was_swapped_for_another_is_refused(api: MemoryApi, tmp_path: Path) -> None:
    """The marks copied along with a CA that did not sign the serving certificate: not what we write."""
    keeper(api, tmp_path, Clock(T0)).sync()
    secret = copy.deepcopy(api.objects[SECRET_PATH])
    swapped = Material(ATTACKER_CA, stored(api).serving).secret_data()
    secret["data"].update({k: swapped[k] for k in ("ca.crt", "ca.key")})
    api.put_object(SECRET_PATH, secret)
    with pytest.raises(selfcert.ForeignSecret, match=r"serving certificate \(tls.crt\) that its CA"):
        keeper(api, tmp_path, Clock(T0), "b").sync()


def test_told_to_adopt_a_usable_secret_keeps_its_material_and_marks_it(
    api: MemoryApi, tmp_path: Path
) -> None:
    api.put_object(SECRET_PATH, planted_secret())
    adopted = Material.from_secret(api.objects[SECRET_PATH])
    served = adopting_keeper(api, tmp_path, Clock(T0)).sync()
    assert served == adopted
    assert bundles(api) == [ATTACKER_CA.cert_pem] * 3
    meta = api.objects[SECRET_PATH]["metadata"]
    assert meta["annotations"] == {"trainop/webhook-certificate": "self-managed"}
    assert [r["uid"] for r in meta["ownerReferences"]] == ["sa-uid"]
    writes = api.state_writes()
    assert keeper(api, tmp_path, Clock(T0), "b").sync() == adopted  # adopted once, ours from then on
    assert api.state_writes() == writes


def test_a_secret_made_before_the_mark_existed_is_kept_and_gets_the_mark(
    api: MemoryApi, tmp_path: Path
) -> None:
    original = keeper(api, tmp_path, Clock(T0)).sync()
    secret = copy.deepcopy(api.objects[SECRET_PATH])
    del secret["metadata"]["annotations"]  # as the previous version created it: labels and owner only
    api.put_object(SECRET_PATH, secret)
    assert keeper(api, tmp_path, Clock(T0), "b").sync() == original
    assert api.objects[SECRET_PATH]["metadata"]["annotations"] == {selfcert.MARK: selfcert.MARK_VALUE}


def test_under_an_identity_without_service_account_the_mark_decides(api: MemoryApi, tmp_path: Path) -> None:
    api.user = {"username": "kubernetes-admin"}
    created = keeper(api, tmp_path, Clock(T0)).sync()
    assert "ownerReferences" not in api.objects[SECRET_PATH]["metadata"]
    assert keeper(api, tmp_path, Clock(T0), "b").sync() == created
    del api.objects[SECRET_PATH]
    api.put_object(SECRET_PATH, planted_secret())
    with pytest.raises(
        selfcert.ForeignSecret, match="does not carry the annotation trainop/webhook-certificate"
    ):
        keeper(api, tmp_path, Clock(T0), "c").sync()


def test_a_failed_self_subject_review_fails_the_sync_and_is_asked_again(
    api: MemoryApi, tmp_path: Path
) -> None:
    api.review_error = ApiError(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", 503, "unavailable"
    )
    k = keeper(api, tmp_path, Clock(T0))
    with pytest.raises(RuntimeError, match="cannot tell which ServiceAccount this server runs as"):
        k.sync()
    assert SECRET_PATH not in api.objects
    api.review_error = None
    k.sync()
    assert [r["uid"] for r in api.objects[SECRET_PATH]["metadata"]["ownerReferences"]] == ["sa-uid"]


def test_a_replaced_ca_is_trusted_beside_the_old_one_until_the_grace_period_ends(
    api: MemoryApi, tmp_path: Path
) -> None:
    clock = Clock(T0)
    k = keeper(api, tmp_path, clock)
    old = k.sync()
    clock.now = T0 + timedelta(days=10)
    del api.objects[SECRET_PATH]  # e.g. deleted by hand
    new = k.sync()
    assert new.ca != old.ca
    assert bundles(api) == [new.ca.cert_pem + old.ca.cert_pem] * 3
    clock.now += settings(tmp_path).grace - timedelta(seconds=1)
    k.sync()
    assert bundles(api) == [new.ca.cert_pem + old.ca.cert_pem] * 3
    clock.now += timedelta(seconds=2)
    k.sync()
    assert bundles(api) == [new.ca.cert_pem] * 3


def test_a_replica_that_read_the_secret_just_before_its_ca_was_replaced_leaves_the_new_ca_alone(
    api: MemoryApi, tmp_path: Path
) -> None:
    clock = Clock(T0)
    stale = keeper(api, tmp_path, clock, "stale")
    old = stale.sync()
    clock.now = T0 + timedelta(days=10)
    del api.objects[SECRET_PATH]
    new = keeper(api, tmp_path, clock, "fresh").sync()
    # The stale replica's sync read the old Secret before the replacement, and injects now.
    assert stale.inject("validatingwebhookconfigurations", "trainop-validate", old.ca) is False
    assert bundles(api) == [new.ca.cert_pem + old.ca.cert_pem] * 3
    assert stale.sync() == new  # its next check reads the new Secret


def test_a_foreign_ca_bundle_is_replaced(api: MemoryApi, tmp_path: Path) -> None:
    clock = Clock(T0)
    stale = certs.issue_ca(T0 - timedelta(days=100))
    for path in (MUTATING, VALIDATING):
        for hook in api.objects[path]["webhooks"]:
            hook["clientConfig"]["caBundle"] = base64.b64encode(stale.cert_pem).decode()
    k = keeper(api, tmp_path, clock)
    served = k.sync()
    clock.now += settings(tmp_path).grace + certs.CLOCK_SKEW
    k.sync()
    assert bundles(api) == [served.ca.cert_pem] * 3


def test_a_re_created_configuration_is_injected_again(api: MemoryApi, tmp_path: Path) -> None:
    k = keeper(api, tmp_path, Clock(T0))
    served = k.sync()
    api.put_object(
        VALIDATING, webhook_configuration("ValidatingWebhookConfiguration", "trainop-validate", hooks=2)
    )
    k.sync()
    assert bundles(api) == [served.ca.cert_pem] * 3


def test_a_missing_configuration_is_named(api: MemoryApi, tmp_path: Path) -> None:
    del api.objects[VALIDATING]
    with pytest.raises(RuntimeError, match="validatingwebhookconfigurations/trainop-validate does not exist"):
        keeper(api, tmp_path, Clock(T0)).sync()


def test_start_up_retries_until_the_configurations_exist(api: MemoryApi, tmp_path: Path) -> None:
    missing = api.objects.pop(VALIDATING)
    rotator = selfcert.Rotator(keeper(api, tmp_path, Clock(T0)))
    timer = threading.Timer(0.5, lambda: api.put_object(VALIDATING, missing))
    timer.start()
    served = rotator.start_up(retry_max=0.2)
    assert bundles(api)[-1] == served.ca.cert_pem


# ---------------------------------------------------------------------------------------------- settings

ENV = {
    "TRAINOP_WEBHOOK_NAMESPACE": "ops",
    "TRAINOP_WEBHOOK_CERT_SECRET": "ops-webhook-cert",
    "TRAINOP_WEBHOOK_SERVICE": "ops-webhooks",
    "TRAINOP_WEBHOOK_MUTATING_CONFIGURATIONS": "ops-mutate",
    "TRAINOP_WEBHOOK_VALIDATING_CONFIGURATIONS": "ops-validate, ops-validate-2",
}


def test_settings_from_the_environment() -> None:
    s = CertSettings.from_env({**ENV, "TRAINOP_WEBHOOK_CERT_HOSTS": "127.0.0.1,localhost"})
    assert s.hosts == ("ops-webhooks.ops.svc", "ops-webhooks.ops.svc.cluster.local", "127.0.0.1", "localhost")
    assert s.configurations() == [
        ("mutatingwebhookconfigurations", "ops-mutate"),
        ("validatingwebhookconfigurations", "ops-validate"),
        ("validatingwebhookconfigurations", "ops-validate-2"),
    ]
    assert s.pem_file == Path("/tmp/trainop-webhook-tls/tls.pem")
    assert s.check_interval == 60


@pytest.mark.parametrize(("raw", "adopt"), [("", False), ("false", False), ("true", True), ("True", True)])
def test_adopting_a_foreign_secret_is_off_unless_set(raw: str, adopt: bool) -> None:
    assert CertSettings.from_env({**ENV, "TRAINOP_WEBHOOK_CERT_ADOPT": raw}).adopt is adopt


def test_a_bad_adopt_setting_is_named() -> None:
    with pytest.raises(ValueError, match="TRAINOP_WEBHOOK_CERT_ADOPT: expected true or false, got 'yes'"):
        CertSettings.from_env({**ENV, "TRAINOP_WEBHOOK_CERT_ADOPT": "yes"})


@pytest.mark.parametrize(
    "missing", ["TRAINOP_WEBHOOK_NAMESPACE", "TRAINOP_WEBHOOK_CERT_SECRET", "TRAINOP_WEBHOOK_SERVICE"]
)
def test_a_missing_setting_is_named(missing: str) -> None:
    message = f"{missing}: expected a value \\(needed by the self-managed certificate"
    with pytest.raises(ValueError, match=message):
        CertSettings.from_env({k: v for k, v in ENV.items() if k != missing})


def test_settings_need_a_configuration_to_inject() -> None:
    env = {k: v for k, v in ENV.items() if "CONFIGURATIONS" not in k}
    with pytest.raises(ValueError, match="TRAINOP_WEBHOOK_MUTATING_CONFIGURATIONS"):
        CertSettings.from_env(env)


@pytest.mark.parametrize("raw", ["0", "-5", "soon", "1e9"])
def test_a_bad_check_interval_is_named(raw: str) -> None:
    with pytest.raises(ValueError, match=f"TRAINOP_WEBHOOK_CERT_CHECK_SECONDS: expected .* got '{raw}'"):
        CertSettings.from_env({**ENV, "TRAINOP_WEBHOOK_CERT_CHECK_SECONDS": raw})


# ---------------------------------------------------------------------------------------------- helpers


def handshake(server_ctx: ssl.SSLContext, ca: KeyPair, hostname: str) -> bytes:
    """The certificate a client that trusts only `ca` and checks `hostname` receives from `server_ctx`."""
    client_ctx = ssl.create_default_context(cadata=ca.cert_pem.decode())
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            client_ctx.wrap_socket(raw, server_hostname=hostname) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
            tls.sendall(b"x")
    finally:
        thread.join(5)
        listener.close()
    assert der is not None
    return der


# ---------------------------------------------------------------------------------------------- API client


def test_without_credentials_the_client_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRAINOP_KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(RuntimeError, match=r"automountServiceAccountToken.*TRAINOP_KUBECONFIG is not set"):
        kubeclient.connect("")


def test_a_kubeconfig_with_inline_ca_and_a_token_file(tmp_path: Path, ca: KeyPair) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    config = {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [
            {
                "name": "k",
                "cluster": {
                    "server": "https://127.0.0.1:6443/",
                    "certificate-authority-data": base64.b64encode(ca.cert_pem).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": {"tokenFile": str(token)}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    client = kubeclient.from_kubeconfig(path)
    assert client.server == "https://127.0.0.1:6443"
    assert client._token() == "first"
    token.write_text("rotated\n")  # as the kubelet rotates a projected token
    assert client._token() == "rotated"


def test_a_broken_kubeconfig_is_named(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("current-context: missing\ncontexts: []\n")
    with pytest.raises(ValueError, match=re.escape(f"TRAINOP_KUBECONFIG={path}: not a usable kubeconfig")):
        kubeclient.from_kubeconfig(path)
