"""PaddleJob: PADDLE_* for collective (workers only) and parameter-server (with a Master) modes."""

from __future__ import annotations

from trainop.api.kinds import PADDLEJOB
from trainop.frameworks.base import Framework, Json, env
from trainop.job.context import JobContext


class Paddle(Framework):
    info = PADDLEJOB

    def qualified(self, ctx: JobContext) -> bool:
        # Kubeflow switches on whether a Master spec exists: worker-only jobs get `<ns>/<name>`.
        return not ctx.has("Master")

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        out = [
            env("PYTHONUNBUFFERED", "1"),
            env("PADDLE_JOB_ID", ctx.name),
            env("PADDLE_NNODES", ctx.total_replicas()),
        ]
        leader = "Master" if ctx.has("Master") else "Worker"
        port = ctx.port(leader, 0)
        if rtype == leader and index == 0:
            # The rendezvous leader advertises its own pod IP: its Service is not resolvable until Ready.
            out += [
                {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                env("PADDLE_MASTER", f"$(POD_IP_DUMMY):{port}"),
            ]
        else:
            out.append(env("PADDLE_MASTER", f"{ctx.host(leader, 0)}:{port}"))
        if ctx.has("Master"):
            out.append(env("PADDLE_SERVER_NUM" if rtype == "Master" else "PADDLE_TRAINER_NUM", "1"))
        return out
