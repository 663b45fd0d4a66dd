"""Slow clients cannot hold the servers: every connection has deadlines, and each process a connection cap.

Through real gunicorn with the shipped config modules, on loopback: connections that send one byte and stop
(the first byte of a request, or of a TLS ClientHello) must not keep a real request from being answered,
and the server closes them itself at their deadline. docs/limits-connections.md has the numbers.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from pathlib import Path

from tests.builders import admission_review, job
from tests.servers import (
    Server,
    closed_by_server,
    serve,
    serve_webhooks_tls,
    slow_connections,
    threads,
)

# The client's patience with a real request: far below the deadline the slow connections get in the
# tests that need them to stay open (LONG), so an answer proves it came while they were all still there.
PATIENCE = 15.0
LONG = "60"
# How late past its deadline the server may close a connection: the event loop's tick plus a loaded machine.
MARGIN = 10.0


def sync(server: Server, conn: http.client.HTTPConnection | None = None) -> http.client.HTTPResponse:
    body = {"parent": job("XGBoostJob", name="real", namespace="slow", Master=1), "children": {}}
    conn = conn or http.client.HTTPConnection("127.0.0.1", server.port, timeout=PATIENCE)
    conn.request("POST", "/sync", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    assert response.status == 200
    return response


def validate_over_tls(server: Server, cert: Path) -> None:
    context = ssl.create_default_context(cafile=str(cert))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, timeout=PATIENCE, context=context)
    try:
        conn.request("POST", "/validate", json.dumps(admission_review(job("JAXJob", Worker=1))))
        response = conn.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["response"]["allowed"] is True
    finally:
        conn.close()


def scrape(server: Server) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", server.metrics_port, timeout=PATIENCE)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        return response.read().decode()
    finally:
        conn.close()


def started_request(port: int, head: bytes, body: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head + body)
    return sock


# The hook port (plain HTTP).


def test_a_sync_is_answered_while_200_connections_have_each_sent_one_byte(tmp_path: Path) -> None:
    with (
        serve("hooks", tmp_path, TRAINOP_HOOK_HEADER_TIMEOUT=LONG) as server,
        slow_connections(server.port, 200),
    ):
        sync(server)


def test_a_request_that_stops_before_its_headers_end_is_closed_at_the_header_deadline(tmp_path: Path) -> None:
    with (
        serve("hooks", tmp_path, TRAINOP_HOOK_HEADER_TIMEOUT="2") as server,
        slow_connections(server.port, 20) as socks,
    ):
        assert all(closed_by_server(sock, 2 + MARGIN) for sock in socks)


def test_an_idle_kept_alive_connection_outlives_the_header_deadline(tmp_path: Path) -> None:
    with serve("hooks", tmp_path, TRAINOP_HOOK_HEADER_TIMEOUT="1") as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=PATIENCE)
        try:
            sync(server, conn)
            sock = conn.sock
            time.sleep(3)  # idle between two requests, three times the header deadline
            sync(server, conn)
            assert conn.sock is sock  # http.client would have reconnected had the server closed it
        finally:
            conn.close()


def test_a_kept_alive_connection_whose_next_request_stalls_is_closed_at_the_header_deadline(
    tmp_path: Path,
) -> None:
    with serve("hooks", tmp_path, TRAINOP_HOOK_HEADER_TIMEOUT="2") as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=PATIENCE)
        try:
            sync(server, conn)
            assert conn.sock is not None
            conn.sock.sendall(b"P")
            assert closed_by_server(conn.sock, 2 + MARGIN)
        finally:
            conn.close()


def test_a_small_body_that_stalls_is_closed_at_the_body_deadline(tmp_path: Path) -> None:
    head = b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    with (
        serve("hooks", tmp_path, TRAINOP_HOOK_BODY_TIMEOUT="2", TRAINOP_HOOK_HEADER_TIMEOUT=LONG) as server,
        started_request(server.port, head, b'{"parent": ') as sock,
    ):
        assert closed_by_server(sock, 2 + MARGIN)


def test_a_large_body_that_stalls_in_a_thread_is_cut_off_at_the_body_deadline(tmp_path: Path) -> None:
    length = 4 * 1024 * 1024  # above what the event loop buffers: a thread reads it
    head = f"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode()
    with (
        serve("hooks", tmp_path, TRAINOP_HOOK_BODY_TIMEOUT="2", TRAINOP_HOOK_HEADER_TIMEOUT=LONG) as server,
        started_request(server.port, head, b"[" * 1024) as sock,
    ):
        assert closed_by_server(sock, 2 + MARGIN)


def test_a_sync_is_answered_while_200_connections_trickle_large_bodies(tmp_path: Path) -> None:
    # 4 MiB: above what the event loop buffers, so threads would read these bodies from the network.
    head = (
        b"POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4194304\r\n\r\n"
    )
    env = {"TRAINOP_HOOK_BODY_TIMEOUT": LONG, "TRAINOP_HOOK_HEADER_TIMEOUT": LONG}
    with serve("hooks", tmp_path, **env) as server:
        trickling = [started_request(server.port, head, b"[" * 1024) for _ in range(200)]
        try:
            sync(server)
        finally:
            for sock in trickling:
                sock.close()


def test_at_the_connection_cap_the_oldest_unfinished_requests_make_room(tmp_path: Path) -> None:
    env = {"TRAINOP_HOOK_MAX_CONNECTIONS": "50", "TRAINOP_HOOK_HEADER_TIMEOUT": LONG}
    with serve("hooks", tmp_path, workers=1, **env) as server, slow_connections(server.port, 100) as socks:
        sync(server)
        assert closed_by_server(socks[0], MARGIN)


def test_a_request_head_above_64_kib_is_refused_without_waiting_for_its_end(tmp_path: Path) -> None:
    with serve("hooks", tmp_path) as server:
        head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (65 * 1024)
        with started_request(server.port, head, b"") as sock:
            assert sock.recv(100).startswith(b"HTTP/1.1 431 ")


def test_a_client_that_expects_100_continue_gets_it_before_sending_its_body(tmp_path: Path) -> None:
    body = json.dumps({"parent": job("XGBoostJob", name="real", namespace="slow", Master=1), "children": {}})
    head = (
        "POST /sync HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with serve("hooks", tmp_path) as server, started_request(server.port, head, b"") as sock:
        sock.settimeout(PATIENCE)
        assert sock.recv(100).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body.encode())
        assert sock.recv(100).startswith(b"HTTP/1.1 200 ")


# The webhook port (TLS).


def test_an_admission_review_is_answered_while_200_tls_handshakes_have_stalled(tmp_path: Path) -> None:
    env = {"TRAINOP_WEBHOOK_HANDSHAKE_TIMEOUT": LONG}
    with serve_webhooks_tls(tmp_path, **env) as (server, cert), slow_connections(server.port, 200):
        validate_over_tls(server, cert)


def test_a_stalled_tls_handshake_is_closed_at_the_handshake_deadline(tmp_path: Path) -> None:
    with (
        serve_webhooks_tls(tmp_path, TRAINOP_WEBHOOK_HANDSHAKE_TIMEOUT="2") as (server, _cert),
        slow_connections(server.port, 20) as socks,
    ):
        assert all(closed_by_server(sock, 2 + MARGIN) for sock in socks)


def test_a_tls_connection_that_sends_no_request_is_closed_at_the_header_deadline(tmp_path: Path) -> None:
    with serve_webhooks_tls(tmp_path, TRAINOP_WEBHOOK_HEADER_TIMEOUT="2") as (server, cert):
        context = ssl.create_default_context(cafile=str(cert))
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"POST /validate HTTP/1.1\r\n")
            assert closed_by_server(tls, 2 + MARGIN)


# The metrics ports, served by the gunicorn master.


def test_a_scrape_is_answered_while_1000_connections_have_each_sent_one_byte(tmp_path: Path) -> None:
    with (
        serve("hooks", tmp_path, TRAINOP_HOOK_METRICS_TIMEOUT=LONG) as server,
        slow_connections(server.metrics_port, 1000),
    ):
        assert "# HELP" in scrape(server)


def test_slow_metrics_connections_take_no_thread_of_the_master(tmp_path: Path) -> None:
    with serve("webhooks", tmp_path, TRAINOP_WEBHOOK_METRICS_TIMEOUT=LONG) as server:
        before = threads(server.proc.pid)
        with slow_connections(server.metrics_port, 1000):
            scrape(server)  # every one of the 1000 has been accepted by now
            assert threads(server.proc.pid) <= before + 2


def test_a_slow_metrics_connection_is_closed_at_the_metrics_deadline(tmp_path: Path) -> None:
    with (
        serve("hooks", tmp_path, TRAINOP_HOOK_METRICS_TIMEOUT="2") as server,
        slow_connections(server.metrics_port, 20) as socks,
    ):
        assert all(closed_by_server(sock, 2 + MARGIN) for sock in socks)
