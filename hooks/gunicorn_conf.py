"""gunicorn settings for the hook server: `gunicorn -c python:hooks.gunicorn_conf hooks.app:app`.

Metacontroller calls hooks concurrently (5 workers per controller by default) and reuses connections,
so threads and a long keep-alive matter more than processes on small nodes.

Every value read from the environment comes from the server's one settings object (hooks.settings),
built here, in gunicorn's master: a malformed variable ends the process before any worker starts, with
its name on stderr. TRAINOP_HOOK_BIND (default 0.0.0.0:8080), TRAINOP_HOOK_WORKERS (2),
TRAINOP_HOOK_THREADS (8); Prometheus metrics of all workers are served by the master on
TRAINOP_HOOK_METRICS_BIND (default 0.0.0.0:8081; "" turns them off), see trainop.metrics.

Every connection has deadlines and each process a connection cap (trainop.serving; the variables
TRAINOP_HOOK_{HEADER,BODY,RESPONSE}_TIMEOUT, TRAINOP_HOOK_MAX_CONNECTIONS, TRAINOP_HOOK_METRICS_TIMEOUT and
TRAINOP_HOOK_METRICS_MAX_CONNECTIONS are in docs/limits-connections.md).
"""

import os

from hooks.settings import current
from trainop.metrics import GunicornHooks
from trainop.serving import deadline_worker

_settings = current()
bind = _settings.listener.bind
# gthread, except that a connection gets a thread only once its request has arrived.
worker_class = deadline_worker(_settings.listener.deadlines)
workers = _settings.listener.workers
threads = _settings.listener.threads
# Open connections per worker process; at the cap the oldest unfinished request (else the oldest idle
# connection) is closed for each new one.
worker_connections = _settings.listener.max_connections
# An idle kept-alive connection between two requests: Metacontroller reuses its connections.
keepalive = 75
timeout = 30
graceful_timeout = 20
accesslog = None
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
# gunicorn 27 otherwise creates a control socket under $HOME, which a read-only root filesystem forbids.
control_socket_disable = True

_metrics = GunicornHooks("hooks", _settings.metrics)
on_starting = _metrics.on_starting
when_ready = _metrics.when_ready
child_exit = _metrics.child_exit
on_exit = _metrics.on_exit
