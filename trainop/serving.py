"""A gunicorn worker that gives a connection a thread only once its request has arrived, with deadlines.

gunicorn's gthread worker hands every new connection to a thread as soon as it has sent a byte; the
thread then does the TLS handshake and reads the request head with blocking reads and no deadline. 200
connections that each send one byte and stop hold every thread of both workers, and a real request waits
until the attacker lets go. `DeadlineWorker` keeps gthread (its thread pool, keep-alive, shutdown) but
moves everything a client can make slow into the worker's event loop, where a waiting connection costs a
file descriptor and a few bytes, not a thread:

* the TLS handshake, non-blocking, within `handshake_seconds` of the accept;
* the request head (request line and headers), within `header_seconds` of its start: the accept (or the
  handshake) on a new connection, the first byte of the next request on a kept-alive one. An idle kept-alive
  connection between requests is legitimate and keeps gunicorn's `keepalive` bound; a request that has
  started and stalls is not, and gets the much shorter head deadline;
* a body of known length up to `buffered_body_bytes`, while the process holds less than
  `buffer_budget_bytes` of such bodies, within `body_seconds` of the head. A larger or chunked body, or
  one the client sends only after "100 Continue", is read by a thread, and the event loop shuts the
  connection down if it is not complete `body_seconds` after the thread took it, which ends the thread's
  blocking read. At most half the threads read bodies from the network; further such requests wait in
  the event loop, unread, and are closed if still waiting `body_seconds` after their head;
* the answer: the loop shuts down a connection whose response is not written `response_seconds` after
  its body, so a client that stops reading cannot hold a thread for ever.

At `worker_connections` open connections the oldest one still sending its request (or else the oldest idle
kept-alive one) is closed for each new one, so a flood cannot keep a new client from being accepted.

The numbers and their environment variables: docs/limits-connections.md. HTTP/2 is not served (the
servers never enable it).
"""

from __future__ import annotations

import contextlib
import errno
import re
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

# gunicorn ships no type annotations.
from gunicorn import http  # type: ignore[import-untyped]
from gunicorn import sock as gsock
from gunicorn.http.body import ChunkedReader, LengthReader  # type: ignore[import-untyped]
from gunicorn.workers.gthread import TConn, ThreadWorker  # type: ignore[import-untyped]

from trainop.envvalues import PositiveInt, Seconds, Text

# How often the event loop wakes to enforce the deadlines at the latest: the slack on every deadline.
TICK_SECONDS = 0.25
_HEAD_END = b"\r\n\r\n"
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length[ \t]*:[ \t]*(\d{1,12})[ \t]*\r\n", re.IGNORECASE)
_TRANSFER_ENCODING = re.compile(rb"\r\ntransfer-encoding[ \t]*:", re.IGNORECASE)
_EXPECT_CONTINUE = re.compile(rb"\r\nexpect[ \t]*:[ \t]*100-continue", re.IGNORECASE)
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
)


@dataclass(frozen=True)
class Deadlines:
    """Per-connection deadlines and buffers of one server (docs/limits-connections.md)."""

    handshake_seconds: float = 5.0
    header_seconds: float = 10.0
    body_seconds: float = 10.0
    response_seconds: float = 60.0
    max_head_bytes: int = 64 * 1024
    buffered_body_bytes: int = 1024 * 1024
    buffer_budget_bytes: int = 32 * 1024 * 1024

    @classmethod
    def from_env(cls, prefix: str, environ: Mapping[str, str]) -> Deadlines:
        """`<prefix>_HANDSHAKE_TIMEOUT`, `_HEADER_TIMEOUT`, `_BODY_TIMEOUT`, `_RESPONSE_TIMEOUT` (seconds)."""
        default = cls()
        return cls(
            handshake_seconds=Seconds(f"{prefix}_HANDSHAKE_TIMEOUT", default.handshake_seconds).read(environ),
            header_seconds=Seconds(f"{prefix}_HEADER_TIMEOUT", default.header_seconds).read(environ),
            body_seconds=Seconds(f"{prefix}_BODY_TIMEOUT", default.body_seconds).read(environ),
            response_seconds=Seconds(f"{prefix}_RESPONSE_TIMEOUT", default.response_seconds).read(environ),
        )


@dataclass(frozen=True)
class Listener:
    """How a gunicorn server listens: `<prefix>_BIND`, `_WORKERS`, `_THREADS`, `_MAX_CONNECTIONS` (open
    connections per worker process) and the deadlines of its connections."""

    bind: str
    workers: int
    threads: int
    max_connections: int = 1000
    deadlines: Deadlines = Deadlines()

    @classmethod
    def from_env(
        cls, prefix: str, environ: Mapping[str, str], *, bind: str, workers: int, threads: int
    ) -> Listener:
        return cls(
            bind=Text(f"{prefix}_BIND", bind).read(environ),
            workers=PositiveInt(f"{prefix}_WORKERS", workers).read(environ),
            threads=PositiveInt(f"{prefix}_THREADS", threads).read(environ),
            max_connections=PositiveInt(f"{prefix}_MAX_CONNECTIONS", cls.max_connections).read(environ),
            deadlines=Deadlines.from_env(prefix, environ),
        )


def deadline_worker(deadlines: Deadlines) -> type[DeadlineWorker]:
    """The worker class for a gunicorn config's `worker_class`, bound to these deadlines."""
    return type("DeadlineWorker", (DeadlineWorker,), {"deadlines": deadlines})


class _Reading:
    """A connection the event loop reads until its request (head, and a small body) has arrived."""

    __slots__ = ("buffer", "deadline", "handshaking", "need")

    def __init__(self, deadline: float, handshaking: bool) -> None:
        self.buffer = bytearray()
        self.deadline = deadline
        self.handshaking = handshaking
        # Bytes that complete the request once the head is known to announce a body; None before.
        self.need: int | None = None


class DeadlineWorker(ThreadWorker):  # type: ignore[misc]
    deadlines = Deadlines()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Both touched by the event loop only; dicts keep insertion order, so the first is the oldest.
        self._reading: dict[TConn, _Reading] = {}
        self._buffered = 0
        # Connections a thread holds: the time by which the current phase must be over, and whether that
        # phase is the answer (after the body).
        self._held: dict[TConn, tuple[float, bool]] = {}
        self._held_lock = threading.Lock()
        # Requests whose body a thread reads from the network: at most half the threads, so that a client
        # trickling a large body cannot take the threads that requests which have arrived whole need. The
        # others wait in the event loop, unread, under their body deadline. Event loop only.
        # Each with the message its parser held before (a kept-alive connection's previous request).
        self._network_bodies: dict[TConn, object] = {}
        self._waiting_bodies: dict[TConn, _Reading] = {}

    # --- accepting -------------------------------------------------------------------------------------

    def accept(self, listener: socket.socket) -> None:
        try:
            client, addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        if self.nr_conns >= self.worker_connections:
            self._evict_one()
        conn = TConn(self.cfg, client, addr, listener.getsockname())  # non-blocking from here
        now = time.monotonic()
        if self.cfg.is_ssl:
            try:
                conn.sock = gsock.ssl_context(self.cfg).wrap_socket(
                    client,
                    server_side=True,
                    suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
                    do_handshake_on_connect=False,
                )
            except (OSError, ssl.SSLError) as exc:
                self.log.warning("cannot start TLS on a new connection: %s", exc)
                self._drop(conn)
                return
            self._start_reading(conn, _Reading(now + self.deadlines.handshake_seconds, handshaking=True))
        else:
            self._start_reading(conn, _Reading(now + self.deadlines.header_seconds, handshaking=False))

    def _evict_one(self) -> None:
        """Make room for a new connection: the oldest one still sending its request, else the oldest idle."""
        if self._reading:
            oldest = next(iter(self._reading))
            self._stop_reading(oldest)
            self._drop(oldest)
        elif self.keepalived_conns:
            idle = self.keepalived_conns.popleft()
            self._unregister(idle)
            self._drop(idle)

    # --- reading the request in the event loop --------------------------------------------------------

    def on_client_socket_readable(self, conn: TConn, client: Any) -> None:
        """A kept-alive connection's next request has begun: from now on it has the head deadline."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._start_reading(conn, _Reading(time.monotonic() + self.deadlines.header_seconds, False))
        self._on_readable(conn, conn.sock)

    def _start_reading(self, conn: TConn, reading: _Reading) -> None:
        self._reading[conn] = reading
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _stop_reading(self, conn: TConn) -> _Reading:
        self._waiting_bodies.pop(conn, None)
        reading = self._reading.pop(conn)
        self._buffered -= len(reading.buffer)
        self._unregister(conn)
        return reading

    def _on_readable(self, conn: TConn, _fileobj: Any) -> None:
        reading = self._reading.get(conn)
        if reading is None:
            return
        try:
            if reading.handshaking:
                conn.sock.do_handshake()
                reading.handshaking = False
                reading.deadline = time.monotonic() + self.deadlines.header_seconds
                self.poller.modify(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))
            closed = self._receive(conn, reading)
        except ssl.SSLWantReadError:
            return
        except ssl.SSLWantWriteError:
            self.poller.modify(conn.sock, selectors.EVENT_WRITE, partial(self._on_readable, conn))
            return
        except (OSError, ssl.SSLError, ValueError):
            closed = True
        if closed:
            self._stop_reading(conn)
            self._drop(conn)
            return
        self._maybe_hand_off(conn, reading)

    def _receive(self, conn: TConn, reading: _Reading) -> bool:
        """Read what has arrived (the poller calls again while more waits); True when the client closed."""
        try:
            data = conn.sock.recv(64 * 1024)
            # TLS may hold decrypted bytes that no longer make the socket readable.
            while data and isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                more = conn.sock.recv(64 * 1024)
                if not more:
                    break
                data += more
        except (BlockingIOError, ssl.SSLWantReadError):
            return False
        if not data:
            return True
        reading.buffer += data
        self._buffered += len(data)
        return False

    def _maybe_hand_off(self, conn: TConn, reading: _Reading) -> None:
        buffer = reading.buffer
        if reading.need is None:
            end = buffer.find(_HEAD_END)
            if end < 0:
                if len(buffer) > self.deadlines.max_head_bytes:
                    self._refuse_head(conn)
                return
            head = bytes(buffer[: end + 2])
            length = _CONTENT_LENGTH.search(head)
            body = int(length.group(1)) if length and not _TRANSFER_ENCODING.search(head) else 0
            reading.need = end + len(_HEAD_END) + body
            budget_left = self.deadlines.buffer_budget_bytes - self._buffered
            # A client that waits for "100 Continue" (gunicorn sends it) sends no body until then.
            waits = _EXPECT_CONTINUE.search(head) is not None
            reading.deadline = time.monotonic() + self.deadlines.body_seconds
            chunked = _TRANSFER_ENCODING.search(head) is not None
            large = body > self.deadlines.buffered_body_bytes or body > budget_left
            if chunked or (body and (waits or large)):
                self._body_from_network(conn)
                return
        if len(buffer) >= reading.need:
            self._hand_off(conn)

    def _body_from_network(self, conn: TConn) -> None:
        """A thread is to read this body as it arrives: now if fewer than half the threads do, else later."""
        if len(self._network_bodies) < max(1, self.cfg.threads // 2):
            self._network_bodies[conn] = getattr(conn.parser, "mesg", None)
            self._hand_off(conn)  # the thread reads this body, under the body deadline
            return
        reading = self._reading[conn]
        self._unregister(conn)  # read no further until a thread is free for it
        self._waiting_bodies[conn] = reading

    def _network_body_done(self, conn: TConn) -> None:
        """A thread has the whole body (or gave up): the next waiting request may have its place."""
        if conn not in self._network_bodies:
            return
        del self._network_bodies[conn]
        while self._waiting_bodies and len(self._network_bodies) < max(1, self.cfg.threads // 2):
            waiting = next(iter(self._waiting_bodies))
            del self._waiting_bodies[waiting]
            if waiting in self._reading:
                self._network_bodies[waiting] = getattr(waiting.parser, "mesg", None)
                self._hand_off(waiting)

    def _refuse_head(self, conn: TConn) -> None:
        self._stop_reading(conn)
        # One non-blocking send: a client that does not read its refusal must not stall the event loop.
        with contextlib.suppress(OSError, ValueError):
            conn.sock.send(_HEAD_TOO_LARGE)
        self._drop(conn)

    def _hand_off(self, conn: TConn) -> None:
        """The request (or at least its head) is here: give the connection to a thread."""
        reading = self._stop_reading(conn)
        conn.sock.setblocking(True)
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
            conn.initialized = True
        conn.data_ready = True
        conn.parser.unreader.unread(bytes(reading.buffer))
        self.enqueue_req(conn)

    # --- connections held by threads ------------------------------------------------------------------

    def handle(self, conn: TConn) -> Any:
        with self._held_lock:
            self._held[conn] = (time.monotonic() + self.deadlines.body_seconds, False)
        try:
            return super().handle(conn)
        finally:
            with self._held_lock:
                self._held.pop(conn, None)
            self.method_queue.defer(self._network_body_done, conn)

    def _enforce_held(self, now: float) -> None:
        for conn, before in list(self._network_bodies.items()):
            if getattr(conn.parser, "mesg", None) is not before and _body_complete(conn):
                self._network_body_done(conn)
        with self._held_lock:
            for conn, (deadline, answering) in list(self._held.items()):
                if deadline > now:
                    continue
                if not answering and _body_complete(conn):
                    # The body is in: from here the thread computes and writes the answer.
                    self._held[conn] = (now + self.deadlines.response_seconds, True)
                    continue
                del self._held[conn]
                # Ends the thread's blocking read or write; it then closes the connection itself.
                with contextlib.suppress(OSError, ValueError):
                    conn.sock.shutdown(socket.SHUT_RDWR)

    # --- the event loop -------------------------------------------------------------------------------

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        super().wait_for_and_dispatch_events(min(timeout, TICK_SECONDS))
        now = time.monotonic()
        for conn in [c for c, r in self._reading.items() if r.deadline <= now]:
            self._stop_reading(conn)
            self._drop(conn)
        self._enforce_held(now)

    def _unregister(self, conn: TConn) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)

    def _drop(self, conn: TConn) -> None:
        self.nr_conns -= 1
        conn.close()


def _body_complete(conn: TConn) -> bool:
    """Whether the thread has read the whole body of the request it is serving."""
    message = getattr(conn.parser, "mesg", None)
    body = getattr(message, "body", None)
    reader = getattr(body, "reader", None)
    if isinstance(reader, LengthReader):
        return bool(reader.length == 0)
    if isinstance(reader, ChunkedReader):
        return reader.parser is None
    return False
