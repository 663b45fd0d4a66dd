"""The metrics port's own server answers exactly as prometheus_client's does, and its limits are validated."""

from __future__ import annotations

import gzip
import http.client
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app, start_http_server

from trainop.local.ports import free_ports
from trainop.metrics import MetricsLimits, MetricsServer
from trainop.serving import Deadlines


@pytest.fixture(scope="module")
def ports() -> Iterator[tuple[int, int]]:
    registry = CollectorRegistry()
    Counter("jobs_created", "Jobs created.", ["namespace"], registry=registry).labels("a").inc(3)
    Histogram("sync_seconds", "Sync latency.", registry=registry).observe(0.2)
    ours_port, theirs_port = free_ports(2)
    ours = MetricsServer(("127.0.0.1", ours_port), make_wsgi_app(registry), MetricsLimits()).start()
    theirs, _thread = start_http_server(theirs_port, "127.0.0.1", registry=registry)
    yield ours_port, theirs_port
    ours.shutdown()
    theirs.shutdown()


def get(port: int, target: str, **headers: str) -> tuple[int, str | None, str | None, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", target, headers=headers)
        response = conn.getresponse()
        body = response.read()
        encoding = response.getheader("Content-Encoding")
        if encoding == "gzip":
            body = gzip.decompress(body)  # the compressed bytes carry a timestamp
        return response.status, response.getheader("Content-Type"), encoding, body
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("target", "headers"),
    [
        ("/metrics", {}),
        ("/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"}),
        ("/metrics", {"Accept-Encoding": "gzip"}),
        ("/metrics?name[]=jobs_created_total", {}),
        ("/favicon.ico", {}),
    ],
)
def test_a_scrape_gets_the_same_answer_as_from_prometheus_clients_server(
    ports: tuple[int, int], target: str, headers: dict[str, str]
) -> None:
    ours, theirs = ports
    assert get(ours, target, **headers) == get(theirs, target, **headers)


def test_a_request_head_above_the_limit_is_refused(ports: tuple[int, int]) -> None:
    ours, _ = ports
    conn = http.client.HTTPConnection("127.0.0.1", ours, timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"X-Pad": "a" * (MetricsLimits().max_request_bytes + 1)})
        assert conn.getresponse().status == 431
    finally:
        conn.close()


def test_a_metrics_timeout_that_is_not_a_number_names_the_variable() -> None:
    with pytest.raises(ValueError, match="TRAINOP_HOOK_METRICS_TIMEOUT: expected a number of seconds"):
        MetricsLimits.from_env("TRAINOP_HOOK", {"TRAINOP_HOOK_METRICS_TIMEOUT": "soon"})


def test_a_metrics_connection_cap_of_zero_names_the_variable() -> None:
    message = "TRAINOP_WEBHOOK_METRICS_MAX_CONNECTIONS: expected a positive integer"
    with pytest.raises(ValueError, match=message):
        MetricsLimits.from_env("TRAINOP_WEBHOOK", {"TRAINOP_WEBHOOK_METRICS_MAX_CONNECTIONS": "0"})


def test_a_header_deadline_of_zero_names_the_variable() -> None:
    with pytest.raises(ValueError, match="TRAINOP_HOOK_HEADER_TIMEOUT: expected a number of seconds above 0"):
        Deadlines.from_env("TRAINOP_HOOK", {"TRAINOP_HOOK_HEADER_TIMEOUT": "0"})


def test_deadlines_default_when_their_variables_are_unset() -> None:
    assert Deadlines.from_env("TRAINOP_HOOK", {}) == Deadlines()
