"""PyTorchJob: MASTER_*/RANK/WORLD_SIZE, torchrun's PET_* (elastic), the master-DNS init container, HPA."""

from __future__ import annotations

from collections.abc import Sequence

from trainop.api import constants as c
from trainop.api.kinds import PYTORCHJOB
from trainop.frameworks.base import Counts, Framework, Json, env
from trainop.job.context import JobContext
from trainop.job.observed import ObservedPod

HPA_KEY = "HorizontalPodAutoscaler.autoscaling/v2"


class PyTorch(Framework):
    info = PYTORCHJOB

    def qualified(self, ctx: JobContext) -> bool:
        # Kubeflow switches on whether a Master spec exists: worker-only jobs get `<ns>/<name>`.
        return not ctx.has("Master")

    def _nproc(self, ctx: JobContext) -> int:
        value = ctx.spec.get("nprocPerNode")
        # auto/cpu/gpu are resolved by torchrun inside the pod; WORLD_SIZE then counts pods (Kubeflow #1790).
        return int(value) if isinstance(value, str) and value.isdigit() else 1

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        out = [env("PYTHONUNBUFFERED", "1")]
        total = ctx.total_replicas()
        if ctx.has("Master"):
            port, addr = ctx.port("Master", 0), ctx.host("Master", 0)
            rank = index if rtype == "Master" else index + ctx.replicas("Master")
            out += [
                env("MASTER_PORT", port),
                env("PET_MASTER_PORT", port),
                env("MASTER_ADDR", addr),
                env("PET_MASTER_ADDR", addr),
                env("WORLD_SIZE", total * self._nproc(ctx)),
                env("RANK", rank),
                env("PET_NODE_RANK", rank),
            ]
        if ctx.spec.get("nprocPerNode") is not None:
            out.append(env("PET_NPROC_PER_NODE", ctx.spec["nprocPerNode"]))
        elastic = ctx.spec.get("elasticPolicy")
        if isinstance(elastic, dict):
            out += self._elastic_env(ctx, elastic)
        else:
            out.append(env("PET_NNODES", total))
        return out

    def _elastic_env(self, ctx: JobContext, elastic: Json) -> list[Json]:
        host = elastic.get("rdzvHost") or ctx.host("Worker", 0)
        port = elastic.get("rdzvPort") or ctx.port("Worker", 0)
        lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
        nnodes = f"{lo}:{hi}" if lo is not None and hi is not None else str(ctx.replicas("Worker"))
        out = [
            env("PET_RDZV_ENDPOINT", f"{host}:{port}"),
            env("PET_RDZV_BACKEND", elastic.get("rdzvBackend") or "c10d"),
            env("PET_NNODES", nnodes),
        ]
        if elastic.get("maxRestarts") is not None:
            out.append(env("PET_MAX_RESTARTS", elastic["maxRestarts"]))
        if elastic.get("nProcPerNode") is not None:
            out.append(env("PET_NPROC_PER_NODE", elastic["nProcPerNode"]))
        if elastic.get("rdzvId"):
            out.append(env("PET_RDZV_ID", elastic["rdzvId"]))
        conf = elastic.get("rdzvConf") or []
        if conf:
            out.append(env("PET_RDZV_CONF", ",".join(f"{kv.get('key')}={kv.get('value')}" for kv in conf)))
        if elastic.get("standalone"):
            out.append(env("PET_STANDALONE", ""))
        return out

    def init_containers(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        if rtype == "Master" or not ctx.has("Master") or not ctx.settings.wait_for_dns:
            return []
        master = ctx.host("Master", 0)
        script = (
            f"err=1;for i in $(seq {ctx.settings.pytorch_init_max_tries}); do if nslookup {master}; "
            "then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err"
        )
        return [
            {
                "name": "init-pytorch",
                "image": ctx.settings.pytorch_init_image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {
                    "limits": {"cpu": "100m", "memory": "20Mi"},
                    "requests": {"cpu": "50m", "memory": "10Mi"},
                },
                "command": ["sh", "-c", script],
            }
        ]

    def succeeded(self, ctx: JobContext, counts: dict[str, Counts], pods: Sequence[ObservedPod]) -> bool:
        if super().succeeded(ctx, counts, pods):
            return True
        # Elastic worker-only jobs finish when any worker finishes: torchrun ends all of them together.
        elastic = ctx.spec.get("elasticPolicy") is not None
        return not ctx.has("Master") and elastic and counts["Worker"].succeeded > 0

    def extra_children(self, ctx: JobContext, pods: Sequence[ObservedPod], active: bool) -> list[Json]:
        elastic = ctx.spec.get("elasticPolicy")
        if not isinstance(elastic, dict) or not elastic.get("metrics") or ctx.suspended:
            return []
        return [
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": ctx.name, "namespace": ctx.namespace},
                "spec": {
                    "scaleTargetRef": {"apiVersion": c.API_VERSION, "kind": self.info.kind, "name": ctx.name},
                    "minReplicas": elastic["minReplicas"],
                    "maxReplicas": elastic["maxReplicas"],
                    "metrics": elastic["metrics"],
                },
            }
        ]
