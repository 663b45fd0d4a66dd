"""gunicorn settings for the webhook server: `gunicorn -c python:webhooks.gunicorn_conf webhooks.app:app`.

Environment:
  TRAINOP_WEBHOOK_BIND      address to listen on (default 0.0.0.0:9443)
  TRAINOP_WEBHOOK_CERT_MODE files (the only mode; default when unset): serve the files below, written by the
                            cert-rotator sidecar (webhooks.certrotate, the install default), cert-manager
                            or by hand. The server itself never needs an API token.
  TRAINOP_TLS_CERT_FILE     serving certificate (PEM); re-read when the file changes
  TRAINOP_TLS_KEY_FILE      its private key (the same file as the certificate for cert-rotator's tls.pem);
                            leave both unset for plain HTTP (tests, local runs)
  TRAINOP_WEBHOOK_WORKERS   worker processes (default 2)
  TRAINOP_WEBHOOK_THREADS   threads per worker (default 16)
  TRAINOP_WEBHOOK_MAX_BODY_BYTES  request body limit (default 8 MiB; bytes, or 8Mi), used by webhooks.app
  TRAINOP_WEBHOOK_METRICS_BIND    Prometheus metrics of all workers, plain HTTP, served by the master
                                  (default 0.0.0.0:8082; "" turns them off), see trainop.metrics
  TRAINOP_WEBHOOK_{HANDSHAKE,HEADER,BODY,RESPONSE}_TIMEOUT, TRAINOP_WEBHOOK_MAX_CONNECTIONS,
  TRAINOP_WEBHOOK_METRICS_TIMEOUT, TRAINOP_WEBHOOK_METRICS_MAX_CONNECTIONS
                            per-connection deadlines and connection caps: docs/limits-connections.md
  TRAINOP_WEBHOOK_LOG_LEVEL debug, info (default), warning, error or critical

Every value read from the environment comes from the server's one settings object (webhooks.settings),
built here, in gunicorn's master: a malformed variable ends the process before any worker starts, with
its name on stderr.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any

from trainop.metrics import GunicornHooks
from trainop.serving import deadline_worker
from webhooks.settings import current
from webhooks.tls import CertReloader

_settings = current()
bind = [_settings.listener.bind]

# Admission calls are short and CPU-bound (~2 ms); on 2 cores two processes use both. Threads are for
# concurrency, not speed: the apiserver sends one request per concurrent create, each on a connection of
# its own whose TLS handshake and body read hold a thread; with 4 threads per worker, 45 jobs created at
# once (tests/differential) saw 25 denied by the apiserver's 10 s webhook timeout, with 32 none. gthread
# is also the worker that supports keep-alive, which the apiserver relies on: a fresh TLS handshake per
# call triples the cost. Ours is gthread except that the TLS handshake and the request are read in the
# worker's event loop under deadlines, and a connection gets a thread only once its request has arrived:
# the port is open to every pod, and 200 connections that sent one byte each held all 32 threads.
worker_class = deadline_worker(_settings.listener.deadlines)
workers = _settings.listener.workers
threads = _settings.listener.threads
# Open connections per worker process; at the cap the oldest unfinished request (else the oldest idle
# connection) is closed for each new one.
worker_connections = _settings.listener.max_connections
# Longer than the apiserver's idle-connection timeout (Go's http.Transport default, 90 s), so the client
# always closes an idle connection first and never sends a request into one the server is closing.
keepalive = 120
# The apiserver gives up after the webhook's timeoutSeconds (at most 30 s).
timeout = 30
graceful_timeout = 20

# Worker heartbeat files on tmpfs: the default temp dir may be disk-backed or on a read-only root.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
# gunicorn >= 25 opens a control socket under $HOME by default; a read-only pod cannot create it and
# concurrent servers (tests) would fight over it. The webhook needs no runtime control.
control_socket_disable = True

# webhooks.app writes one JSON line per request; gunicorn's access log would duplicate it.
accesslog = None
errorlog = "-"
loglevel = _settings.log_level

certfile = _settings.tls.cert_file or None
keyfile = _settings.tls.key_file or None
_certs = CertReloader(certfile, keyfile) if certfile and keyfile else None


def ssl_context(config: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """gunicorn calls this for every new TLS connection; the reloader rebuilds only when the files change."""
    if _certs is None:  # pragma: no cover - gunicorn only calls this with certfile set
        return default_ssl_context_factory()
    return _certs.context(default_ssl_context_factory)


_metrics = GunicornHooks("webhooks", _settings.metrics)
when_ready = _metrics.when_ready
child_exit = _metrics.child_exit


on_starting = _metrics.on_starting
on_exit = _metrics.on_exit
