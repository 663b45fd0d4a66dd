"""XGBoostJob: rabit-style MASTER_*/RANK/WORLD_SIZE, WORKER_ADDRS for LightGBM; any failure fails the job."""

from __future__ import annotations

from trainop.api.kinds import XGBOOSTJOB
from trainop.frameworks.base import Framework, Json, env
from trainop.job.context import JobContext


class XGBoost(Framework):
    info = XGBOOSTJOB
    # Kubeflow fails an XGBoostJob on any failed pod unless restartPolicy is ExitCode.
    recreate_policies = ("ExitCode",)

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        total = ctx.total_replicas()
        rank = index if rtype == "Master" else index + ctx.replicas("Master")
        out = [
            env("MASTER_PORT", ctx.port("Master", 0)),
            env("MASTER_ADDR", ctx.host("Master", 0)),
            env("WORLD_SIZE", total),
            env("RANK", rank),
            env("PYTHONUNBUFFERED", "1"),
        ]
        if total > 1 and ctx.has("Worker"):
            workers = ",".join(ctx.host("Worker", i) for i in range(total - 1))
            out += [env("WORKER_PORT", ctx.port("Worker", 0)), env("WORKER_ADDRS", workers)]
        return out
