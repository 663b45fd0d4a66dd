"""The webhook keeps its own certificate (webhooks.certrotate, the install default): no cert-manager needed.

Like Kubeflow's cert-controller rotator, every replica runs the same idempotent `CertKeeper.sync`:

1. get-or-create the Secret (TRAINOP_WEBHOOK_CERT_SECRET) holding a CA (ca.crt, ca.key) and a serving
   certificate for the Service's DNS names (tls.crt, tls.key). A valid one is never replaced; a missing
   one is created (`POST`, and on 409 AlreadyExists the winner's is read back), an unusable one or one
   close to expiry is renewed (`PUT` with the read resourceVersion, and on 409 Conflict the winner's is
   read back). So concurrent replicas converge on one Secret. The serving certificate is renewed with the
   same CA, which leaves `caBundle` untouched; the CA itself lasts ten years.
2. use only a Secret this server made. Whatever CA the Secret holds is served and injected into both
   `caBundle`s, so a Secret of that name planted by someone else (a namespace admin, before the first
   start) would make the apiserver trust their CA. What the server creates carries the annotation
   `trainop/webhook-certificate: self-managed` and, when it runs as a ServiceAccount (always in a pod),
   an owner reference to that ServiceAccount's uid, which nobody can know before the install creates
   it; and its serving certificate is signed by its CA. Those marks can be copied by anyone who may
   create Secrets in the namespace and read the ServiceAccount after the install: the admission policy
   that lets only this server write the Secret is what refuses such a copy, and it is required
   (docs/security.md#the-certificate-secret-policy-is-required). A Secret lacking one is refused: the
   keeper logs `secret-refused` with the reason and writes no serving file (the pod stays unready; a
   running server keeps presenting its current certificate). Delete the Secret to have a new one issued,
   or set TRAINOP_WEBHOOK_CERT_ADOPT=true to take it over (a hand-made or cert-manager Secret): its material
   is kept while usable, and it gets the marks. A Secret made before the annotation existed (our
   labels and owner reference) gets the annotation on its next check.
3. write the serving key and certificate into one file of the volume it shares with the serving
   container (tmpfs; the root filesystem is read-only), atomically, so the server's
   `webhooks.tls.CertReloader` presents it from the next TLS handshake on.
4. patch `caBundle` of every webhook of the configurations it is told about (strategic merge keyed by
   webhook name, with a resourceVersion precondition). Only that field is written, under the field
   manager `trainop-webhooks`: `helm upgrade` (three-way merge) and `kubectl apply --server-side` leave
   a field they never set alone, so re-applying the install manifests keeps the injected CA.

`python -m webhooks.certrotate` (webhooks/certrotate.py: the cert-rotator container, the only one holding
the API token) runs `sync` until it succeeds, before which no serving file exists (so the serving
container starts and turns ready only with its certificate in place and injected), then every
TRAINOP_WEBHOOK_CERT_CHECK_SECONDS: that renews certificates
well before they expire, follows a Secret another replica renewed, and re-injects a configuration that
was re-created. When a CA is replaced (its Secret was deleted), the CAs already in `caBundle` are kept
beside the new one for a grace period, so replicas still serving the old certificate until their next
check are trusted meanwhile.

Environment:
  TRAINOP_WEBHOOK_NAMESPACE          namespace of the Secret and the Service
  TRAINOP_WEBHOOK_CERT_SECRET        the Secret's name
  TRAINOP_WEBHOOK_SERVICE            the Service: the certificate names <service>.<namespace>.svc and
                                     <service>.<namespace>.svc.cluster.local
  TRAINOP_WEBHOOK_MUTATING_CONFIGURATIONS, TRAINOP_WEBHOOK_VALIDATING_CONFIGURATIONS
                                     the configurations to inject the CA into (comma-separated names)
  TRAINOP_WEBHOOK_CERT_HOSTS         more DNS names or IP addresses for the certificate, comma-separated
                                     (a development URL's host)
  TRAINOP_WEBHOOK_CERT_DIR           where the key + certificate file goes (default /tmp/trainop-webhook-tls)
  TRAINOP_WEBHOOK_CERT_CHECK_SECONDS period of the check (default 60)
  TRAINOP_WEBHOOK_CERT_ADOPT         true: take over a Secret of that name this server did not make
                                     (default false: refuse it)
  TRAINOP_KUBECONFIG                 a kubeconfig instead of the pod's ServiceAccount (development, tests)
"""

from __future__ import annotations

import base64
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, Protocol

from cryptography import x509

from trainop.envvalues import Flag, Names, Required, Seconds, SettingError, Text
from trainop.jsontypes import Json
from trainop.kubeclient import KUBECONFIG_ENV, STRATEGIC_MERGE, ApiError
from webhooks import codec
from webhooks.certs import (
    CLOCK_SKEW,
    SERVING_LIFETIME,
    KeyPair,
    ca_problem,
    issue_ca,
    issue_serving,
    pem,
    pem_certificates,
    serving_problem,
    signed_by,
)

Clock = Callable[[], datetime]

# Shown in managedFields, so `kubectl get -o yaml --show-managed-fields` says who wrote caBundle.
FIELD_MANAGER: Final = "trainop-webhooks"
ENV_NAMESPACE: Final = "TRAINOP_WEBHOOK_NAMESPACE"
ENV_SECRET: Final = "TRAINOP_WEBHOOK_CERT_SECRET"
ENV_SERVICE: Final = "TRAINOP_WEBHOOK_SERVICE"
ENV_HOSTS: Final = "TRAINOP_WEBHOOK_CERT_HOSTS"
ENV_MUTATING: Final = "TRAINOP_WEBHOOK_MUTATING_CONFIGURATIONS"
ENV_VALIDATING: Final = "TRAINOP_WEBHOOK_VALIDATING_CONFIGURATIONS"
ENV_DIR: Final = "TRAINOP_WEBHOOK_CERT_DIR"
ENV_INTERVAL: Final = "TRAINOP_WEBHOOK_CERT_CHECK_SECONDS"
ENV_ADOPT: Final = "TRAINOP_WEBHOOK_CERT_ADOPT"
DEFAULT_DIR: Final = "/tmp/trainop-webhook-tls"
DEFAULT_INTERVAL: Final = 60.0
# Renew the serving certificate with a third of its life left; a CA that cannot sign a full-length
# serving certificate any more is replaced.
SERVING_RENEW_BEFORE: Final = SERVING_LIFETIME / 3
CA_RENEW_BEFORE: Final = SERVING_LIFETIME
MIN_GRACE: Final = timedelta(minutes=5)
# Conflicts mean another replica just wrote; a few re-reads always suffice unless something loops.
MAX_CONFLICTS: Final = 5
LABELS: Final = {
    "app.kubernetes.io/name": "trainop",
    "app.kubernetes.io/part-of": "trainop",
    "app.kubernetes.io/component": "webhooks",
}
# What marks a Secret as made by this server (besides the owner reference to its ServiceAccount).
MARK: Final = "trainop/webhook-certificate"
MARK_VALUE: Final = "self-managed"
CONFIGURATION_RESOURCES: Final = {
    "mutating": "mutatingwebhookconfigurations",
    "validating": "validatingwebhookconfigurations",
}

log = logging.getLogger("trainop.webhooks.certs")


class ForeignSecret(RuntimeError):
    """The Secret of our name was not made by this server, and adopting it was not asked for."""


class Api(Protocol):
    def get(self, path: str) -> Json | None: ...

    def request(
        self, method: str, path: str, body: Json | None = None, content_type: str | None = None
    ) -> Json: ...


@dataclass(frozen=True)
class CertSettings:
    namespace: str
    secret: str
    service: str
    extra_hosts: tuple[str, ...] = ()
    mutating: tuple[str, ...] = ()
    validating: tuple[str, ...] = ()
    cert_dir: Path = Path(DEFAULT_DIR)
    check_interval: float = DEFAULT_INTERVAL
    adopt: bool = False

    # A kubeconfig instead of the pod's ServiceAccount (development, tests); "" for the ServiceAccount.
    kubeconfig: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> CertSettings:
        why = "needed by the self-managed certificate, webhooks.certrotate"
        settings = cls(
            namespace=Required(ENV_NAMESPACE, why=why).read(environ),
            secret=Required(ENV_SECRET, why=why).read(environ),
            service=Required(ENV_SERVICE, why=why).read(environ),
            extra_hosts=Names(ENV_HOSTS).read(environ),
            mutating=Names(ENV_MUTATING).read(environ),
            validating=Names(ENV_VALIDATING).read(environ),
            cert_dir=Path(Text(ENV_DIR, DEFAULT_DIR).read(environ)),
            check_interval=Seconds(ENV_INTERVAL, DEFAULT_INTERVAL, maximum=86400).read(environ),
            adopt=Flag(ENV_ADOPT, False).read(environ),
            kubeconfig=Text(KUBECONFIG_ENV, "").read(environ),
        )
        if not settings.mutating and not settings.validating:
            raise SettingError(
                f"{ENV_MUTATING} or {ENV_VALIDATING}",
                "the webhook configurations to inject the CA into",
                None,
            )
        return settings

    @property
    def hosts(self) -> tuple[str, ...]:
        """The names the apiserver may dial: the Service's (for a `service` clientConfig), then extras."""
        svc = f"{self.service}.{self.namespace}.svc"
        return tuple(dict.fromkeys((svc, f"{svc}.cluster.local", *self.extra_hosts)))

    @property
    def pem_file(self) -> Path:
        """Serving key and certificate in one file: one atomic rename swaps both."""
        return self.cert_dir / "tls.pem"

    @property
    def grace(self) -> timedelta:
        """How long replaced CAs stay trusted: every replica checks (and follows the Secret) in that time."""
        return max(MIN_GRACE, timedelta(seconds=3 * self.check_interval))

    def configurations(self) -> list[tuple[str, str]]:
        """(resource, name) of every webhook configuration to inject the CA into."""
        return [(CONFIGURATION_RESOURCES["mutating"], n) for n in self.mutating] + [
            (CONFIGURATION_RESOURCES["validating"], n) for n in self.validating
        ]


@dataclass(frozen=True)
class Material:
    """What the Secret holds: the CA and the serving certificate it signed."""

    ca: KeyPair
    serving: KeyPair

    def secret_data(self) -> dict[str, str]:
        raw = {
            "ca.crt": self.ca.cert_pem,
            "ca.key": self.ca.key_pem,
            "tls.crt": self.serving.cert_pem,
            "tls.key": self.serving.key_pem,
        }
        return {key: base64.b64encode(value).decode() for key, value in raw.items()}

    @classmethod
    def from_secret(cls, secret: Json) -> Material | None:
        """The material of a Secret, or None if a key is missing (as in cert-manager's: no ca.key)."""
        data = secret.get("data") or {}
        try:
            raw = {
                key: base64.b64decode(data[key], validate=True)
                for key in ("ca.crt", "ca.key", "tls.crt", "tls.key")
            }
        except (KeyError, TypeError, ValueError):
            return None
        return cls(KeyPair(raw["ca.crt"], raw["ca.key"]), KeyPair(raw["tls.crt"], raw["tls.key"]))


def fresh(hosts: tuple[str, ...], now: datetime) -> Material:
    """A new CA and a serving certificate for `hosts` signed by it."""
    ca = issue_ca(now)
    return Material(ca, issue_serving(ca, hosts, now))


def renewal(material: Material | None, hosts: tuple[str, ...], now: datetime) -> tuple[Material, str] | None:
    """The material to store instead of `material` and why, or None while `material` is good."""
    if material is None:
        return fresh(hosts, now), "the Secret holds no CA and serving certificate"
    why = ca_problem(material.ca, now, now + CA_RENEW_BEFORE)
    if why:
        return fresh(hosts, now), why
    why = serving_problem(material.serving, material.ca, hosts, now, now + SERVING_RENEW_BEFORE)
    if why:
        return Material(material.ca, issue_serving(material.ca, hosts, now)), why
    return None


def desired_bundle(ca: KeyPair, current: bytes, now: datetime, grace: timedelta) -> bytes:
    """The caBundle a webhook should carry: our CA, plus the unexpired CAs it had while ours is new.

    While another replica's CA that replaced ours is new, `current` is left alone: we read the Secret
    just before that replica replaced it, and the next check reads theirs. (Writing ours back would
    distrust their certificate until then.)
    """
    try:
        existing = pem_certificates(current) if current.strip() else []
    except ValueError:
        existing = []
    ours = ca.certificate()
    if any(_newer_sibling(c, ours, now, grace) for c in existing):
        return current
    if now >= _issued(ours) + grace:
        return ca.cert_pem
    kept = [c for c in existing if c != ours and c.not_valid_after_utc > now]
    return ca.cert_pem + b"".join(pem(c) for c in dict.fromkeys(kept))


def _issued(cert: x509.Certificate) -> datetime:
    return cert.not_valid_before_utc + CLOCK_SKEW


def _newer_sibling(cert: x509.Certificate, ours: x509.Certificate, now: datetime, grace: timedelta) -> bool:
    """A CA issued by another replica (same subject) after ours, still within its grace period."""
    return cert.subject == ours.subject and _issued(ours) < _issued(cert) and now < _issued(cert) + grace


class CertKeeper:
    """One replica's view of the shared certificate; `sync` is idempotent and safe to run concurrently."""

    def __init__(self, api: Api, settings: CertSettings, clock: Clock = lambda: datetime.now(UTC)) -> None:
        self.api = api
        self.settings = settings
        self.clock = clock
        self._owner: Json | None = None
        self._owner_known = False

    @property
    def secret_path(self) -> str:
        return f"/api/v1/namespaces/{self.settings.namespace}/secrets/{self.settings.secret}"

    def sync(self) -> Material:
        """Make sure the Secret is valid, serve its certificate and inject its CA; returns what is served."""
        material = self.ensure_secret()
        self.write_pem(material.serving)
        for resource, name in self.settings.configurations():
            self.inject(resource, name, material.ca)
        return material

    def ensure_secret(self) -> Material:
        hosts = self.settings.hosts
        for _ in range(MAX_CONFLICTS):
            now = self.clock()
            secret = self.api.get(self.secret_path)
            if secret is None:
                material = fresh(hosts, now)
                try:
                    self.api.request("POST", self.secret_path.rpartition("/")[0], self._new_secret(material))
                except ApiError as exc:
                    if exc.status == 409:  # another replica created it first: use theirs
                        _event("secret-create-lost-race", secret=self.settings.secret)
                        continue
                    raise
                _event("secret-created", secret=self.settings.secret, hosts=list(hosts))
                return material
            current = Material.from_secret(secret)
            refusal = self.refusal(secret, current)
            if refusal is not None and not self.settings.adopt:
                fix = f"delete the Secret to have a new one issued, or set {ENV_ADOPT}=true to take it over"
                name = self.settings.secret
                _event("secret-refused", level=logging.ERROR, secret=name, reason=refusal, fix=fix)
                raise ForeignSecret(f"Secret {name} {refusal}: {fix}")
            renewed = renewal(current, hosts, now)
            unmarked = refusal is not None or not self._marked(secret)
            if renewed is None and current is not None and not unmarked:
                return current
            if renewed is not None:
                material, why = renewed
            else:
                assert current is not None
                material, why = current, "it did not carry this server's marks"
            # PUT carries the resourceVersion just read: a concurrent writer makes this a 409, never a loss.
            secret["data"] = {**(secret.get("data") or {}), **material.secret_data()}
            self._mark(secret)
            try:
                self.api.request("PUT", self.secret_path, secret)
            except ApiError as exc:
                if exc.status == 409:  # another replica wrote first: re-read and judge theirs
                    _event("secret-renewal-lost-race", secret=self.settings.secret)
                    continue
                raise
            kept_ca = current is not None and material.ca == current.ca
            if refusal is not None:
                _event("secret-adopted", level=logging.WARNING, secret=self.settings.secret, was=refusal)
            _event("secret-renewed", secret=self.settings.secret, reason=why, new_ca=not kept_ca)
            return material
        raise RuntimeError(f"Secret {self.settings.secret}: still conflicting after {MAX_CONFLICTS} attempts")

    def refusal(self, secret: Json, material: Material | None) -> str | None:
        """Why `secret` is not one this server made, or None if it is.

        Ours carries our owner reference (when we run as a ServiceAccount) and our annotation (a Secret
        from before the annotation: our owner reference and labels), and holds a serving certificate
        signed by its CA, or no usable material at all (keys removed: renewed like an expired one).
        """
        meta = secret.get("metadata") or {}
        owner = self._service_account()
        if owner is not None:
            refs = meta.get("ownerReferences") or []
            if not any(isinstance(r, dict) and r.get("uid") == owner["uid"] for r in refs):
                account = f"ServiceAccount {owner['name']} (uid {owner['uid']})"
                return f"is not owned by {account}, which this server runs as"
            labels = meta.get("labels") or {}
            if not self._marked(secret) and not LABELS.items() <= labels.items():
                return f"carries neither the annotation {MARK}: {MARK_VALUE} nor this server's labels"
        elif not self._marked(secret):
            return f"does not carry the annotation {MARK}: {MARK_VALUE}"
        if material is not None and not signed_by(material.serving, material.ca):
            return "holds a serving certificate (tls.crt) that its CA (ca.crt) did not sign"
        return None

    @staticmethod
    def _marked(secret: Json) -> bool:
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        return isinstance(annotations, dict) and annotations.get(MARK) == MARK_VALUE

    def _mark(self, secret: Json) -> None:
        """Give an adopted or older Secret the marks of one this server made."""
        meta = secret.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}), MARK: MARK_VALUE}
        meta["labels"] = {**(meta.get("labels") or {}), **LABELS}
        owner = self._service_account()
        refs = list(meta.get("ownerReferences") or [])
        if owner is not None and not any(r.get("uid") == owner["uid"] for r in refs):
            meta["ownerReferences"] = [*refs, owner]

    def write_pem(self, serving: KeyPair) -> bool:
        """Write key + certificate for gunicorn atomically; False if the file already holds them."""
        content = serving.key_pem + serving.cert_pem
        target = self.settings.pem_file
        try:
            if target.read_bytes() == content:
                return False
        except FileNotFoundError:
            pass
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, staging = tempfile.mkstemp(dir=target.parent, prefix=".tls-", suffix=".pem")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(content)
            os.replace(staging, target)
        except BaseException:
            Path(staging).unlink(missing_ok=True)
            raise
        _event("certificate-written", file=str(target))
        return True

    def inject(self, resource: str, name: str, ca: KeyPair) -> bool:
        """Patch `caBundle` of every webhook of one configuration; False if all were already right."""
        path = f"/apis/admissionregistration.k8s.io/v1/{resource}/{name}"
        for _ in range(MAX_CONFLICTS):
            config = self.api.get(path)
            if config is None:
                raise RuntimeError(f"{resource}/{name} does not exist (yet): cannot inject the CA")
            now = self.clock()
            changes = []
            for hook in config.get("webhooks") or []:
                current = base64.b64decode((hook.get("clientConfig") or {}).get("caBundle") or "")
                desired = desired_bundle(ca, current, now, self.settings.grace)
                if desired != current:
                    bundle = base64.b64encode(desired).decode()
                    changes.append({"name": hook["name"], "clientConfig": {"caBundle": bundle}})
            if not changes:
                return False
            patch = {
                "metadata": {"resourceVersion": config["metadata"]["resourceVersion"]},
                "webhooks": changes,
            }
            try:
                self.api.request("PATCH", path, patch, STRATEGIC_MERGE)
            except ApiError as exc:
                if exc.status == 409:
                    continue
                raise
            _event("ca-injected", configuration=f"{resource}/{name}", webhooks=[c["name"] for c in changes])
            return True
        raise RuntimeError(f"{resource}/{name}: still conflicting after {MAX_CONFLICTS} attempts")

    def _new_secret(self, material: Material) -> Json:
        metadata: Json = {
            "name": self.settings.secret,
            "namespace": self.settings.namespace,
            "labels": LABELS,
            "annotations": {MARK: MARK_VALUE},
        }
        owner = self._service_account()
        if owner is not None:
            metadata["ownerReferences"] = [owner]
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            # The type cert-manager gives its Secrets, so cert-manager can take this one over (and we
            # a cert-manager one, when told to adopt it).
            "type": "kubernetes.io/tls",
            "data": material.secret_data(),
        }

    def _service_account(self) -> Json | None:
        """Our ServiceAccount as owner of the Secret, so uninstalling (which deletes it) removes the Secret.

        Who we are comes from a SelfSubjectReview (any authenticated user may ask); a ServiceAccount's
        user info carries its UID. Running under another identity (development), the Secret has no owner.
        A failed review fails this sync (and is asked again): deciding without it would create a Secret
        without owner, which every later start would refuse, and would judge a Secret by its annotation
        alone.
        """
        if self._owner_known:
            return self._owner
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        try:
            info = self.api.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
        except (ApiError, OSError) as exc:
            raise RuntimeError(f"cannot tell which ServiceAccount this server runs as: {exc}") from exc
        self._owner_known = True
        user = (info.get("status") or {}).get("userInfo") or {}
        prefix = f"system:serviceaccount:{self.settings.namespace}:"
        username, uid = str(user.get("username") or ""), user.get("uid")
        if username.startswith(prefix) and uid:
            self._owner = {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "name": username[len(prefix) :],
                "uid": uid,
            }
        return self._owner


class Rotator:
    """`sync` at start, retried until it succeeds, then every check interval until `stop`."""

    def __init__(self, keeper: CertKeeper) -> None:
        self.keeper = keeper
        self._stop = threading.Event()

    def start_up(self, retry_max: float = 30.0) -> Material:
        """The first `sync`, retried until it succeeds: until then no serving file exists (not ready)."""
        delay = 1.0
        while True:
            try:
                return self.keeper.sync()
            # Anything may fail while the install is still being applied (RBAC, configurations, network);
            # each failure is logged and retried rather than crashing the pod into a restart loop.
            except Exception as exc:
                _event("start-up-retry", error=str(exc), retry_in=delay, level=logging.WARNING)
            if self._stop.wait(delay):
                raise RuntimeError("stopped before the webhook certificate was ready")
            delay = min(delay * 2, retry_max)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """The periodic checks, in the calling thread, until `stop` (webhooks.certrotate's main loop)."""
        while not self._stop.wait(self.keeper.settings.check_interval):
            try:
                self.keeper.sync()
            # The server keeps presenting its current certificate; the next check tries again.
            except Exception as exc:
                _event("check-failed", error=str(exc), level=logging.WARNING)


def configure_logging() -> None:
    """JSON lines on stderr, like the request log of webhooks.app."""
    codec.log_json_lines(log)


def _event(event: str, level: int = logging.INFO, **fields: Any) -> None:
    log.log(level, codec.dumps({"event": event, **fields}).decode())
