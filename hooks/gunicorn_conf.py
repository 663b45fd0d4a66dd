"""gunicorn settings for the hook server: `gunicorn -c python:hooks.gunicorn_conf hooks.app:app`.

Metacontroller calls hooks concurrently (5 workers per controller by default) and reuses connections,
so threads and a long keep-alive matter more than processes on small nodes.

Prometheus metrics of all workers are served by the master on TRAINOP_HOOK_METRICS_BIND (default
0.0.0.0:8081; "" turns them off), see trainop.metrics.
"""

import os

from trainop.metrics import GunicornHooks

bind = os.environ.get("TRAINOP_HOOK_BIND", "0.0.0.0:8080")
worker_class = "gthread"
workers = int(os.environ.get("TRAINOP_HOOK_WORKERS", "2"))
threads = int(os.environ.get("TRAINOP_HOOK_THREADS", "8"))
keepalive = 75
timeout = 30
graceful_timeout = 20
accesslog = None
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
# gunicorn 27 otherwise creates a control socket under $HOME, which a read-only root filesystem forbids.
control_socket_disable = True

_metrics = GunicornHooks("hooks", os.environ.get("TRAINOP_HOOK_METRICS_BIND", "0.0.0.0:8081"))
on_starting = _metrics.on_starting
when_ready = _metrics.when_ready
child_exit = _metrics.child_exit
on_exit = _metrics.on_exit
