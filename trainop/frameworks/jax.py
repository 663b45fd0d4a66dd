"""JAXJob: jax.distributed's coordinator address and process ids."""

from __future__ import annotations

from trainop.api.kinds import JAXJOB
from trainop.frameworks.base import Framework, Json, env
from trainop.job.context import JobContext


class Jax(Framework):
    info = JAXJOB
    qualified_messages = True

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        return [
            env("PYTHONUNBUFFERED", "1"),
            env("COORDINATOR_PORT", ctx.port("Worker", 0)),
            env("COORDINATOR_ADDRESS", ctx.host("Worker", 0)),
            env("NUM_PROCESSES", ctx.total_replicas()),
            env("PROCESS_ID", index),
        ]
