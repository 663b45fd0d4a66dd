"""The real server: gunicorn with webhooks.gunicorn_conf, over TLS, on a loopback port.

What it must do: docs/design.md#webhook-serving.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from tests.builders import admission_review, job
from trainop.local.ports import free_ports
from webhooks.tls import CertReloader

ROOT = Path(__file__).resolve().parents[2]
# Waits with room for a loaded machine: a healthy server answers in milliseconds, so they cost nothing.
STARTUP_SECONDS = 60
IO_SECONDS = 30


def make_cert(directory: Path, common_name: str) -> None:
    """A self-signed serving certificate for 127.0.0.1 as tls.crt/tls.key, like a kubernetes.io/tls Secret."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", f"/CN={common_name}", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(directory / "tls.key"), "-out", str(directory / "tls.crt")],
        check=True,
        capture_output=True,
    )  # fmt: skip


def mount_secret(volume: Path, generation: str) -> Path:
    """Write a certificate the way the kubelet updates a Secret volume: new directory, then swap `..data`."""
    make_cert(volume / f"..{generation}", generation)
    staging = volume / "..data_tmp"
    staging.symlink_to(f"..{generation}")
    os.replace(staging, volume / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (volume / name).is_symlink():
            (volume / name).symlink_to(f"..data/{name}")
    return volume / f"..{generation}" / "tls.crt"


def der(cert: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert.read_text())


@contextmanager
def gunicorn(tmp_path: Path, **env: str) -> Iterator[tuple[str, int]]:
    (port,) = free_ports(1)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOP_")}
    environ |= {"TRAINOP_WEBHOOK_BIND": f"127.0.0.1:{port}", "TRAINOP_WEBHOOK_WORKERS": "1", **env}
    log = tmp_path / f"gunicorn-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:webhooks.gunicorn_conf", "webhooks.app:app"],
            cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
        yield "127.0.0.1", port
    finally:
        # SIGTERM, as the kubelet sends: gthread's quick-exit path (SIGINT/SIGQUIT) shuts its thread pool
        # down inside the signal handler and once left a worker deadlocked here.
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the server's own session: its workers go with it
            proc.wait()


def served_cert(addr: tuple[str, int]) -> bytes:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(addr, timeout=IO_SECONDS) as raw, ctx.wrap_socket(raw) as tls:
        cert = tls.getpeercert(binary_form=True)
    assert cert is not None
    return cert


def https(addr: tuple[str, int], trusted: Path) -> closing[http.client.HTTPSConnection]:
    """A client that trusts only `trusted`, so a successful request proves which certificate was served."""
    context = ssl.create_default_context(cafile=str(trusted))
    return closing(http.client.HTTPSConnection(*addr, timeout=IO_SECONDS, context=context))


def plain(addr: tuple[str, int]) -> closing[http.client.HTTPConnection]:
    return closing(http.client.HTTPConnection(*addr, timeout=IO_SECONDS))


def validate_once(conn: http.client.HTTPConnection) -> http.client.HTTPResponse:
    body = json.dumps(admission_review(job("JAXJob", Worker=1)))
    conn.request("POST", "/validate", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    assert resp.status == 200
    assert answer["response"]["allowed"] is True
    return resp


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[tuple[str, int], Path]]:
    volume = tmp_path_factory.mktemp("certs")
    cert = mount_secret(volume, "gen1")
    with gunicorn(
        volume, TRAINOP_TLS_CERT_FILE=str(volume / "tls.crt"), TRAINOP_TLS_KEY_FILE=str(volume / "tls.key")
    ) as addr:
        yield addr, cert


def test_the_webhook_is_served_over_tls_with_the_configured_certificate(
    tls_server: tuple[tuple[str, int], Path],
) -> None:
    addr, cert = tls_server
    assert served_cert(addr) == der(cert)
    with https(addr, cert) as conn:
        validate_once(conn)


def test_two_requests_share_one_kept_alive_connection(tls_server: tuple[tuple[str, int], Path]) -> None:
    addr, cert = tls_server
    with https(addr, cert) as conn:
        first = validate_once(conn)
        sock = conn.sock
        assert not first.will_close
        second = validate_once(conn)
        assert conn.sock is sock  # http.client would have reconnected had the server closed the connection
        assert not second.will_close


def test_a_rotated_secret_is_served_on_the_next_connection_without_a_restart(tmp_path: Path) -> None:
    volume = tmp_path / "certs"
    old = mount_secret(volume, "gen1")
    env = {"TRAINOP_TLS_CERT_FILE": str(volume / "tls.crt"), "TRAINOP_TLS_KEY_FILE": str(volume / "tls.key")}
    with gunicorn(tmp_path, **env) as addr, https(addr, old) as kept_alive:
        validate_once(kept_alive)
        assert served_cert(addr) == der(old)

        new = mount_secret(volume, "gen2")

        assert served_cert(addr) == der(new)
        with https(addr, new) as conn:
            validate_once(conn)
        # A connection opened before the rotation keeps working on its existing session.
        validate_once(kept_alive)


def test_certificate_files_rewritten_in_place_are_served_on_the_next_connection(tmp_path: Path) -> None:
    make_cert(tmp_path / "certs", "first")
    cert = tmp_path / "certs" / "tls.crt"
    env = {"TRAINOP_TLS_CERT_FILE": str(cert), "TRAINOP_TLS_KEY_FILE": str(tmp_path / "certs" / "tls.key")}
    with gunicorn(tmp_path, **env) as addr:
        before = served_cert(addr)
        make_cert(tmp_path / "certs", "second")
        after = served_cert(addr)
        assert before != after == der(cert)


def test_without_certificates_the_server_speaks_plain_http(tmp_path: Path) -> None:
    with gunicorn(tmp_path) as addr, plain(addr) as conn:
        conn.request("GET", "/healthz")
        health = conn.getresponse()
        assert (health.status, json.loads(health.read())) == (200, {"status": "ok"})
        validate_once(conn)


def test_a_body_streamed_without_content_length_is_still_limited(tmp_path: Path) -> None:
    with gunicorn(tmp_path, TRAINOP_WEBHOOK_MAX_BODY_BYTES="1024") as addr, plain(addr) as conn:
        conn.request("POST", "/validate", body=iter([b"{" + b" " * 4096 + b"}"]), encode_chunked=True)
        resp = conn.getresponse()
        assert resp.status == 413
        assert "limit of 1024 bytes" in json.loads(resp.read())["error"]


def test_a_certificate_without_a_key_is_refused_at_startup(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOP_")}
    environ["TRAINOP_TLS_CERT_FILE"] = "/nonexistent/tls.crt"
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webhooks.gunicorn_conf", "--check-config"]
    proc = subprocess.run(
        [*command, "webhooks.app:app"], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode != 0
    message = "TRAINOP_TLS_KEY_FILE: expected a file beside TRAINOP_TLS_CERT_FILE (set both, or neither"
    assert message in proc.stdout + proc.stderr


# CertReloader on its own: what happens between the two files of a non-atomic rotation.


def load(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


def test_a_certificate_and_key_from_different_generations_keep_the_previous_context(tmp_path: Path) -> None:
    make_cert(tmp_path, "one")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    reloader = CertReloader(str(cert), str(key))
    first = reloader.context(lambda: load(cert, key))
    make_cert(tmp_path / "next", "two")
    shutil.copy(tmp_path / "next" / "tls.crt", cert)  # the key has not been written yet

    assert reloader.context(lambda: load(cert, key)) is first

    shutil.copy(tmp_path / "next" / "tls.key", key)
    assert reloader.context(lambda: load(cert, key)) is not first


def test_unchanged_files_reuse_one_context(tmp_path: Path) -> None:
    make_cert(tmp_path, "one")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    reloader = CertReloader(str(cert), str(key))
    assert reloader.context(lambda: load(cert, key)) is reloader.context(lambda: load(cert, key))


def test_unusable_certificates_at_startup_are_an_error(tmp_path: Path) -> None:
    reloader = CertReloader(str(tmp_path / "missing.crt"), str(tmp_path / "missing.key"))
    with pytest.raises(OSError):
        reloader.context(lambda: load(tmp_path / "missing.crt", tmp_path / "missing.key"))
