"""Serving certificates that follow their files, so a rotated Secret is picked up without a restart.

Kubernetes updates a mounted Secret by writing a new `..<timestamp>` directory and swapping the `..data`
symlink, so `tls.crt` keeps its path while the file behind it changes. gunicorn asks its `ssl_context`
hook for a context on every new connection; `CertReloader.context` answers from a cache keyed by the
resolved files' identity and rebuilds it only when that changes. Connections already open keep their
session; the next handshake presents the new certificate.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Callable

log = logging.getLogger("trainop.webhooks.tls")

Signature = tuple[tuple[str, int, int, int], ...]


def file_signature(*paths: str) -> Signature:
    """Identity of each file behind its symlinks: resolved path, inode, size and mtime."""
    out = []
    for path in paths:
        real = os.path.realpath(path)
        st = os.stat(real)
        out.append((real, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class CertReloader:
    def __init__(self, certfile: str, keyfile: str) -> None:
        self.paths = (certfile, keyfile)
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._signature: Signature | None = None
        self._failed: Signature | None = None

    def context(self, factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        """The context for a new connection; `factory` builds one from the files (gunicorn's default)."""
        with self._lock:
            try:
                signature = file_signature(*self.paths)
            except OSError as exc:
                # Files briefly missing mid-rotation: keep serving what we have.
                return self._keep(exc)
            if self._context is not None and signature == self._signature:
                return self._context
            if signature == self._failed:
                return self._keep(None)
            try:
                context = factory()
            except (OSError, ssl.SSLError) as exc:
                # Typically a certificate and key from different generations (written one after the other
                # rather than by an atomic symlink swap); the next connection tries again once they change.
                self._failed = signature
                return self._keep(exc)
            if self._context is not None:
                log.warning("serving certificate changed; new connections use %s", self.paths[0])
            self._context, self._signature, self._failed = context, signature, None
            return context

    def _keep(self, error: BaseException | None) -> ssl.SSLContext:
        if self._context is None:
            raise error or ssl.SSLError("no usable serving certificate")
        if error is not None:
            log.warning("cannot load serving certificate, keeping the previous one: %s", error)
        return self._context
