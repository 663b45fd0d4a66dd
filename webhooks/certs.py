"""The webhook's own PKI as pure functions: issue a CA, issue a serving certificate, find what is wrong.

The apiserver only needs the webhook's CA in `caBundle` and a serving certificate for the Service's DNS
names signed by it; this is all a webhook needs when cert-manager is not installed (Kubeflow's
cert-controller rotator, Kueue and JobSet do the same). Keys are ECDSA P-256: generated in about a
millisecond and accepted by Go's TLS stack. Every certificate is back-dated by `CLOCK_SKEW` so an
apiserver whose clock runs slightly behind still accepts a certificate issued a moment ago.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLOCK_SKEW = timedelta(hours=1)
CA_LIFETIME = timedelta(days=3650)
SERVING_LIFETIME = timedelta(days=365)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes

    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)


def issue_ca(now: datetime, lifetime: timedelta = CA_LIFETIME, name: str = "trainop-webhook-ca") -> KeyPair:
    """A self-signed CA that may sign serving certificates only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        _builder(subject, subject, key.public_key(), now, now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .sign(key, hashes.SHA256())
    )
    return _pair(cert, key)


def issue_serving(
    ca: KeyPair, hosts: Sequence[str], now: datetime, lifetime: timedelta = SERVING_LIFETIME
) -> KeyPair:
    """A TLS server certificate for `hosts` (DNS names or IP addresses), signed by `ca`.

    It never outlives its CA: a chain whose CA expired first is refused however long the leaf is valid.
    """
    if not hosts:
        raise ValueError("a serving certificate needs at least one host name")
    ca_cert = ca.certificate()
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    not_after = min(now + lifetime, ca_cert.not_valid_after_utc)
    cert = (
        _builder(subject, ca_cert.subject, key.public_key(), now, not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return _pair(cert, key)


def ca_problem(ca: KeyPair, now: datetime, until: datetime) -> str | None:
    """Why `ca` cannot serve as our CA from `now` until `until`, or None if it can."""
    try:
        cert = ca.certificate()
        problem = _key_mismatch(ca) or _not_valid(cert, now, until)
    except ValueError as exc:
        return f"the CA does not parse: {exc}"
    if problem:
        return f"the CA {problem}"
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return "the CA has no basicConstraints"
    return None if constraints.ca else "the CA certificate is not a CA"


def serving_problem(
    pair: KeyPair, ca: KeyPair, hosts: Sequence[str], now: datetime, until: datetime
) -> str | None:
    """Why `pair` cannot serve `hosts` under `ca` from `now` until `until`, or None if it can."""
    try:
        cert = pair.certificate()
        problem = _key_mismatch(pair) or _not_valid(cert, now, until)
    except ValueError as exc:
        return f"the serving certificate does not parse: {exc}"
    if problem:
        return f"the serving certificate {problem}"
    try:
        cert.verify_directly_issued_by(ca.certificate())
    except (ValueError, TypeError, InvalidSignature):
        return "the serving certificate is not signed by the CA"
    missing = sorted(set(hosts) - covered_hosts(cert, hosts))
    return f"the serving certificate does not name {', '.join(missing)}" if missing else None


def signed_by(pair: KeyPair, ca: KeyPair) -> bool:
    """Whether `ca`'s key signed `pair`'s certificate (False if either does not parse)."""
    try:
        pair.certificate().verify_directly_issued_by(ca.certificate())
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def covered_hosts(cert: x509.Certificate, hosts: Sequence[str]) -> set[str]:
    """Those of `hosts` that `cert`'s subjectAltName lists exactly (no wildcards: we never issue them)."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    dns = {name.lower() for name in san.get_values_for_type(x509.DNSName)}
    ips = set(san.get_values_for_type(x509.IPAddress))
    out = set()
    for host in hosts:
        ip = _ip(host)
        if (ip in ips) if ip is not None else (host.lower() in dns):
            out.add(host)
    return out


def pem_certificates(bundle: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle (a webhook's caBundle); raises ValueError if it holds none."""
    return x509.load_pem_x509_certificates(bundle)


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: datetime, end: datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(_utc(now) - CLOCK_SKEW)
        .not_valid_after(_utc(end))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _pair(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> KeyPair:
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return KeyPair(pem(cert), key_pem)


def _key_mismatch(pair: KeyPair) -> str | None:
    key = serialization.load_pem_private_key(pair.key_pem, password=None)
    cert_key = pair.certificate().public_key()
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return None if key.public_key().public_bytes(*spki) == cert_key.public_bytes(*spki) else "has another key"


def _not_valid(cert: x509.Certificate, now: datetime, until: datetime) -> str | None:
    if cert.not_valid_before_utc > _utc(now):
        return f"is not valid before {cert.not_valid_before_utc.isoformat()}"
    if cert.not_valid_after_utc < _utc(until):
        return f"expires at {cert.not_valid_after_utc.isoformat()}, before {_utc(until).isoformat()}"
    return None


def _general_name(host: str) -> x509.GeneralName:
    ip = _ip(host)
    return x509.IPAddress(ip) if ip is not None else x509.DNSName(host)


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return moment.astimezone(UTC)
