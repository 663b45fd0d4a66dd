"""A PaddleJob rendezvous with plain sockets (no Paddle install needed), over the env Paddle's
launcher reads: PADDLE_MASTER (host:port of the rendezvous leader), PADDLE_NNODES and PADDLE_JOB_ID.

The leader is the pod the operator gave POD_IP_DUMMY (its PADDLE_MASTER is `$(POD_IP_DUMMY):port`, so
it also proves `$(VAR)` expansion and the status.podIP fieldRef). Every other pod connects to it and
says who it is; once all PADDLE_NNODES have arrived the leader sends the full roster back to each, so
every pod exits 0 only if every pod reached the leader. $RESULT_DIR, when set, receives one JSON per pod.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

TIMEOUT = 120.0


def lead(host: str, port: int, me: str, nodes: int) -> list[str]:
    with socket.create_server((host, port)) as server:
        server.settimeout(TIMEOUT)
        conns = []
        names = [me]
        while len(names) < nodes:
            conn, _ = server.accept()
            names.append(conn.makefile().readline().strip())
            conns.append(conn)
        roster = sorted(names)
        for conn in conns:
            with conn:
                conn.sendall((json.dumps(roster) + "\n").encode())
        return roster


def join(host: str, port: int, me: str) -> list[str]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            with socket.create_connection((host, port), timeout=TIMEOUT) as conn:
                conn.sendall(f"{me}\n".encode())
                return list(json.loads(conn.makefile().readline()))
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # the leader is not listening yet


def main() -> int:
    me, nodes = os.environ["POD_NAME"], int(os.environ["PADDLE_NNODES"])
    host, port = os.environ["PADDLE_MASTER"].rsplit(":", 1)
    leader = "POD_IP_DUMMY" in os.environ
    print(
        f"{me}: job {os.environ['PADDLE_JOB_ID']}, {nodes} nodes, master {host}:{port}, leader: {leader}",
        flush=True,
    )
    roster = lead(host, int(port), me, nodes) if leader else join(host, int(port), me)
    print(f"{me}: roster {', '.join(roster)}", flush=True)
    if os.environ.get("RESULT_DIR"):
        with open(os.path.join(os.environ["RESULT_DIR"], f"{me}.json"), "w") as f:
            json.dump({"pod": me, "leader": leader, "roster": roster}, f)
    return 0 if len(roster) == nodes and me in roster else 1


if __name__ == "__main__":
    sys.exit(main())
