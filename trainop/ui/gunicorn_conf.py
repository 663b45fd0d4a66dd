"""gunicorn settings of `trainop ui --cluster`, the chart's UI Deployment (trainop/ui/server.py runs it).

One worker process: it holds the watched summary of every job (a second process would watch, and hold,
all of it again), the secret the CSRF tokens are bound to, and the bound on open event streams.

The worker is the hooks' and webhooks' gthread worker with deadlines (trainop.serving), which gives a
connection a thread only once its request has arrived, so a client that trickles its request costs a file
descriptor, not a thread. An event stream holds its thread for as long as it is open, so there are
`UiSettings.max_streams` threads for streams (the app answers 503 to one more) and `PAGE_THREADS` more for
pages, which streams can never take. A stream is exempt from the answer deadline (a page's answer must
be written within TRAINOP_UI_RESPONSE_TIMEOUT) for the stream's own lifetime, after which the app ends it
and the browser reconnects.

Variables: TRAINOP_UI_{HANDSHAKE,HEADER,BODY,RESPONSE}_TIMEOUT (seconds) and TRAINOP_UI_MAX_CONNECTIONS
(open connections; at the cap the oldest one still sending its request, else the oldest idle one, is
closed for each new one), as for the hooks, and TRAINOP_UI_MAX_USER_STREAMS (the streams one signed-in
user may hold, default 16; docs/ui.md); `trainop ui` reads them once, into
trainop.ui.settings.UiSettings, before gunicorn starts.
"""

from __future__ import annotations

import os
import time
from typing import Any

from trainop.serving import DeadlineWorker
from trainop.ui.settings import UiSettings
from trainop.ui.sse import STREAM_PREFIX

PAGE_THREADS = 16


class StreamingWorker(DeadlineWorker):
    """The deadline worker, with an event stream's answer allowed to last as long as the stream does."""

    stream_seconds = UiSettings.stream_seconds

    def handle_request(self, req: Any, conn: Any) -> Any:
        if req.path.startswith(STREAM_PREFIX):
            # The app ends the stream after stream_seconds; its last write gets the answer deadline.
            deadline = time.monotonic() + self.stream_seconds + self.deadlines.response_seconds
            with self._held_lock:
                self._held[conn] = (deadline, True)
        return super().handle_request(req, conn)


def settings(ui: UiSettings) -> dict[str, Any]:
    """gunicorn's settings by name, from the UI server's settings."""
    worker = {"deadlines": ui.deadlines, "stream_seconds": ui.stream_seconds}
    return {
        "worker_class": type("StreamingWorker", (StreamingWorker,), worker),
        "workers": 1,
        "threads": ui.max_streams + PAGE_THREADS,
        "worker_connections": ui.max_connections,
        # Browsers keep a connection for the next request of a page (its script, style, streams).
        "keepalive": 15,
        "timeout": 30,
        # Open streams are cut at shutdown; the browser reconnects to the next pod.
        "graceful_timeout": 10,
        "accesslog": None,
        "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
        # gunicorn 27 otherwise makes a control socket under $HOME, which a read-only root filesystem forbids.
        "control_socket_disable": True,
    }
