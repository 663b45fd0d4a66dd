"""`trainop run URL`: a job file fetched over https with the server's certificate verified, bounded in
size and time, plain http only from this machine; every failure says what went wrong and what to do."""

from __future__ import annotations

import http.server
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.builders import container, job, replica
from tests.local.runs import trainop
from tests.servers import make_cert
from trainop.local.fetch import FetchError, fetch
from trainop.local.manifest import ManifestError, load

JOB = yaml.safe_dump(job("PyTorchJob", "from-url", Master=1))


@dataclass
class Site:
    """What the test server answers: path -> (status, headers, body); `/slow` answers after `release`,
    `/drip` sends its body one byte every 50 ms."""

    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    base: str = ""


def handler_for(site: Site) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/slow":
                site.release.wait(30)
            if self.path == "/drip":
                self.send_response(200)
                self.end_headers()
                # 10 s of bytes at most: a fetch that ignored its deadline gets them all and fails the test.
                for _ in range(200):
                    if site.release.is_set():
                        return
                    self.wfile.write(b"#")
                    self.wfile.flush()
                    time.sleep(0.05)
                return
            status, headers, body = site.routes.get(self.path, (404, {}, b"not here"))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def serve(site: Site, context: ssl.SSLContext | None) -> Iterator[Site]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_for(site))
    server.daemon_threads = True
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    site.base = f"{'https' if context else 'http'}://127.0.0.1:{server.server_address[1]}"
    try:
        yield site
    finally:
        site.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def https(cert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    # The machine's own trust settings must not decide these tests.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*cert)
    yield from serve(Site(), context)


@pytest.fixture
def plain() -> Iterator[Site]:
    yield from serve(Site(), None)


def test_a_file_is_fetched_over_https_trusting_the_ca_file(https: Site, cert: tuple[Path, Path]) -> None:
    https.routes["/job.yaml"] = (200, {"Content-Type": "application/yaml"}, JOB.encode())
    assert fetch(f"{https.base}/job.yaml", ca_file=cert[0]) == JOB


def test_ssl_cert_file_is_honoured_like_by_any_openssl_program(
    https: Site, cert: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    https.routes["/job.yaml"] = (200, {}, JOB.encode())
    monkeypatch.setenv("SSL_CERT_FILE", str(cert[0]))
    assert fetch(f"{https.base}/job.yaml") == JOB


def test_an_untrusted_certificate_is_refused_with_how_to_trust_it(https: Site) -> None:
    https.routes["/job.yaml"] = (200, {}, JOB.encode())
    with pytest.raises(FetchError) as err:
        fetch(f"{https.base}/job.yaml")
    assert "the server's TLS certificate is not trusted (self-signed certificate)" in str(err.value)
    assert "--ca-file" in str(err.value) and "SSL_CERT_FILE" in str(err.value)


def test_a_certificate_for_another_host_is_refused(https: Site, cert: tuple[Path, Path]) -> None:
    https.routes["/job.yaml"] = (200, {}, JOB.encode())
    with pytest.raises(FetchError, match=r"not trusted .*not valid for 'localhost'"):
        fetch(f"{https.base.replace('127.0.0.1', 'localhost')}/job.yaml", ca_file=cert[0])


def test_a_ca_file_that_holds_no_certificate_is_named(tmp_path: Path, https: Site) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    with pytest.raises(FetchError, match=r"^--ca-file .*ca\.pem: cannot load CA certificates"):
        fetch(f"{https.base}/job.yaml", ca_file=tmp_path / "ca.pem")


def test_an_http_error_is_reported_with_its_status(https: Site, cert: tuple[Path, Path]) -> None:
    with pytest.raises(FetchError, match=r"^the server answered HTTP 404 Not Found$"):
        fetch(f"{https.base}/absent.yaml", ca_file=cert[0])


def test_a_file_announced_larger_than_the_bound_is_not_read(https: Site, cert: tuple[Path, Path]) -> None:
    https.routes["/big.yaml"] = (200, {"Content-Length": "2001"}, b"#" * 2001)
    with pytest.raises(FetchError, match="the file is 2001 bytes, more than the 2000"):
        fetch(f"{https.base}/big.yaml", ca_file=cert[0], max_bytes=2000)


def test_a_file_that_grows_past_the_bound_without_a_length_is_cut_off(
    https: Site, cert: tuple[Path, Path]
) -> None:
    https.routes["/big.yaml"] = (200, {}, b"#" * 2001)
    with pytest.raises(FetchError, match="larger than the 2000 bytes"):
        fetch(f"{https.base}/big.yaml", ca_file=cert[0], max_bytes=2000)


def test_a_server_that_does_not_answer_in_time_is_given_up(https: Site, cert: tuple[Path, Path]) -> None:
    with pytest.raises(FetchError, match=r"within 0\.5 s"):
        fetch(f"{https.base}/slow", ca_file=cert[0], timeout=0.5)


def test_a_server_that_drips_its_answer_is_given_up_at_the_deadline(
    https: Site, cert: tuple[Path, Path]
) -> None:
    # Every byte comes well within the socket timeout; only the deadline of the whole fetch ends it.
    with pytest.raises(FetchError, match="no complete answer within 1 s"):
        fetch(f"{https.base}/drip", ca_file=cert[0], timeout=1, max_bytes=10**9)


def test_an_answer_that_is_not_text_is_refused(https: Site, cert: tuple[Path, Path]) -> None:
    https.routes["/job.yaml"] = (200, {}, b"\x89PNG\r\n")
    with pytest.raises(FetchError, match="not UTF-8 text"):
        fetch(f"{https.base}/job.yaml", ca_file=cert[0])


def test_a_redirect_within_https_is_followed(https: Site, cert: tuple[Path, Path]) -> None:
    https.routes["/latest.yaml"] = (302, {"Location": "/v1/job.yaml"}, b"")
    https.routes["/v1/job.yaml"] = (200, {}, JOB.encode())
    assert fetch(f"{https.base}/latest.yaml", ca_file=cert[0]) == JOB


def test_a_redirect_to_remote_plain_http_is_refused(https: Site, cert: tuple[Path, Path]) -> None:
    https.routes["/job.yaml"] = (302, {"Location": "http://192.0.2.1/job.yaml"}, b"")
    with pytest.raises(
        FetchError, match=r"^redirected to http://192\.0\.2\.1/job\.yaml: plain http is accepted"
    ):
        fetch(f"{https.base}/job.yaml", ca_file=cert[0])


def test_plain_http_is_refused_for_another_machine() -> None:
    with pytest.raises(FetchError, match="plain http is accepted only from this machine"):
        fetch("http://192.0.2.1/job.yaml")


def test_plain_http_from_this_machine_is_fetched(plain: Site) -> None:
    plain.routes["/job.yaml"] = (200, {}, JOB.encode())
    assert fetch(f"{plain.base}/job.yaml") == JOB


def test_a_fetch_error_is_a_manifest_error_naming_the_url(https: Site) -> None:
    with pytest.raises(ManifestError, match=rf"^{https.base}/job\.yaml: the server's TLS certificate"):
        load(f"{https.base}/job.yaml")


def test_trainop_run_runs_a_job_and_its_script_from_an_https_url(
    https: Site, cert: tuple[Path, Path], tmp_path: Path
) -> None:
    script = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "hello"},
        "data": {"hello.py": "print('hello from the ConfigMap')\n"},
    }
    master = replica(
        "PyTorchJob",
        containers=[
            container(
                "pytorch",
                command=["python3", "/scripts/hello.py"],
                volumeMounts=[{"name": "scripts", "mountPath": "/scripts"}],
            )
        ],
        restartPolicy="Never",
    )
    master["template"]["spec"]["volumes"] = [{"name": "scripts", "configMap": {"name": "hello"}}]
    document = yaml.safe_dump_all([script, job("PyTorchJob", "from-url", Master=master)])
    https.routes["/job.yaml"] = (200, {}, document.encode())
    result = trainop(
        f"{https.base}/job.yaml", "--ca-file", str(cert[0]), "--workdir", str(tmp_path / "run"), timeout=120
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "hello from the ConfigMap" in result.stdout
