"""An MXJob rendezvous with plain sockets (no MXNet install needed): every replica listens on its own
MX_CONFIG address and connects to every other one, so a successful exit proves that the scheduler,
server and worker addresses the operator wrote reach the right processes. It also checks the DMLC_*
variables ps-lite reads against MX_CONFIG.

Each replica exits 0 once it has reached and heard from every other replica; $RESULT_DIR, when set,
receives one JSON file per replica listing both.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import sys
import threading
import time

TIMEOUT = 120.0


def bind_host(host: str) -> str:
    """Locally the address is 127.0.0.1; on a cluster it is this pod's Service, so listen everywhere."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return "0.0.0.0"
    return host


def serve(server: socket.socket, me: str, expected: int, heard: set[str]) -> None:
    while len(heard) < expected:
        conn, _ = server.accept()
        with conn:
            heard.add(conn.makefile().readline().strip())
            conn.sendall(f"{me}\n".encode())


def reach(address: str, me: str, deadline: float) -> str:
    host, port = address.rsplit(":", 1)
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=5) as conn:
                conn.sendall(f"{me}\n".encode())
                return conn.makefile().readline().strip()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # the peer has not started listening yet


def main() -> int:
    config = json.loads(os.environ["MX_CONFIG"])
    cluster, task = config["cluster"], config["task"]
    me = f"{task['type']}:{task['index']}"
    peers = {
        f"{t}:{i}": f"{a['url']}:{a['port']}" for t, addrs in cluster.items() for i, a in enumerate(addrs)
    }
    scheduler = cluster["scheduler"][0]
    dmlc = (os.environ["DMLC_PS_ROOT_URI"], int(os.environ["DMLC_PS_ROOT_PORT"]), os.environ["DMLC_ROLE"])
    if dmlc != (scheduler["url"], scheduler["port"], task["type"]):
        print(f"{me}: DMLC_* {dmlc} disagree with MX_CONFIG {scheduler}", flush=True)
        return 1
    own = peers.pop(me)
    host, port = own.rsplit(":", 1)
    server = socket.create_server((bind_host(host), int(port)), reuse_port=False)
    heard: set[str] = set()
    listener = threading.Thread(target=serve, args=(server, me, len(peers), heard), daemon=True)
    listener.start()
    print(f"{me} listening on {own}; peers: {', '.join(sorted(peers))}", flush=True)
    deadline = time.monotonic() + TIMEOUT
    reached = {name: reach(addr, me, deadline) for name, addr in sorted(peers.items())}
    print(f"{me} reached {', '.join(f'{k} ({v})' for k, v in reached.items())}", flush=True)
    listener.join(max(0.0, deadline - time.monotonic()))
    print(f"{me} heard from {', '.join(sorted(heard))}", flush=True)
    if os.environ.get("RESULT_DIR"):
        result = {"task": me, "reached": sorted(reached), "heard": sorted(heard)}
        with open(os.path.join(os.environ["RESULT_DIR"], f"{me.replace(':', '-')}.json"), "w") as f:
            json.dump(result, f)
    ok = all(reached[k] == k for k in peers) and heard == set(peers)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
