"""The webhook server's settings: one frozen object, read from the environment once at start-up.

gunicorn's master builds it when it reads webhooks.gunicorn_conf (a bad value ends the process there,
with the variable's name on stderr); the workers it forks import webhooks.app and use the same object.
The certificate keeper, a process of its own, has its own settings (webhooks.selfcert.CertSettings).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainop import extensions
from trainop.envvalues import ByteSize, OneOf, SettingError, Text, at_start_up
from trainop.metrics import MetricsPort
from trainop.serving import Listener

PREFIX = "TRAINOP_WEBHOOK"
# The apiserver itself refuses bodies over 3 MiB; 8 MiB leaves room for its AdmissionReview envelope
# (object and oldObject of an UPDATE) while keeping a stray client from exhausting memory.
MAX_BODY = ByteSize("TRAINOP_WEBHOOK_MAX_BODY_BYTES", 8 * 1024 * 1024)
# Estimated parse memory (trainop.jsoncost) that one worker's requests may hold at once: the pod's 512Mi
# hold two workers of ~50 MiB idle, each with this much in flight plus its copies. A real review costs a
# few MiB, so only floods of large bodies ever wait.
MAX_INFLIGHT = ByteSize("TRAINOP_WEBHOOK_MAX_INFLIGHT_BYTES", 96 * 1024 * 1024)
LOG_LEVEL = OneOf("TRAINOP_WEBHOOK_LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical"))
# files is the only mode: the self-managed certificate is kept by a process of its own,
# `python -m webhooks.certrotate` (the cert-rotator container), which writes the files.
CERT_MODE = OneOf("TRAINOP_WEBHOOK_CERT_MODE", "files", ("files",))
CERT_FILE = Text("TRAINOP_TLS_CERT_FILE", "")
KEY_FILE = Text("TRAINOP_TLS_KEY_FILE", "")


@dataclass(frozen=True)
class WebhookLimits:
    """Bytes: of a request body, and of the parse estimate one worker's requests hold at once."""

    max_body_bytes: int = MAX_BODY.default
    max_inflight_bytes: int = MAX_INFLIGHT.default

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> WebhookLimits:
        return cls(MAX_BODY.read(environ), MAX_INFLIGHT.read(environ))


@dataclass(frozen=True)
class ServingCert:
    """The serving certificate and key files (re-read when they change); both "" for plain HTTP."""

    cert_file: str = ""
    key_file: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ServingCert:
        CERT_MODE.read(environ)
        cert = cls(CERT_FILE.read(environ), KEY_FILE.read(environ))
        if bool(cert.cert_file) != bool(cert.key_file):
            missing, other = (KEY_FILE, CERT_FILE) if cert.cert_file else (CERT_FILE, KEY_FILE)
            raise SettingError(
                missing.name, f"a file beside {other.name} (set both, or neither for plain HTTP)", None
            )
        return cert


@dataclass(frozen=True)
class WebhookSettings:
    limits: WebhookLimits
    listener: Listener
    metrics: MetricsPort
    tls: ServingCert
    log_level: str = LOG_LEVEL.default

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> WebhookSettings:
        extensions.check_settings(environ)
        return cls(
            limits=WebhookLimits.from_env(environ),
            listener=Listener.from_env(PREFIX, environ, bind="0.0.0.0:9443", workers=2, threads=16),
            metrics=MetricsPort.from_env(PREFIX, environ, bind="0.0.0.0:8082"),
            tls=ServingCert.from_env(environ),
            log_level=LOG_LEVEL.read(environ),
        )


@functools.cache
def current() -> WebhookSettings:
    """This process's settings: built the first time (in gunicorn's master, from webhooks.gunicorn_conf),
    then the same object, also in the workers it forks."""
    return at_start_up("trainop webhooks", lambda: WebhookSettings.from_env(os.environ))
