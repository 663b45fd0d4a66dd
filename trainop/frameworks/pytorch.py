"""PyTorchJob: MASTER_*/RANK/WORLD_SIZE, torchrun's PET_* (elastic), the master-DNS init container, HPA."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from trainop.api import constants as c
from trainop.api import devices
from trainop.api.checks import Result, check_enum
from trainop.api.jsonpath import dig
from trainop.api.kinds import ChildType, KindInfo
from trainop.api.models import Model, ReplicaSpecs, RunPolicy, optional
from trainop.frameworks.base import (
    TRAINJOB_PORT,
    Counts,
    Framework,
    TrainerNodes,
    check_elastic_bounds,
    completion_index_env,
    default_elastic_bounds,
    env,
    replicas_of,
)
from trainop.job.context import JobContext
from trainop.job.observed import ObservedPod
from trainop.jsontypes import Json

PYTHON = re.compile(r"(.*/)?python(3(\.\d+)?)?")

PYTORCHJOB = KindInfo(
    kind="PyTorchJob",
    plural="pytorchjobs",
    singular="pytorchjob",
    replica_field="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="pytorch",
    port_name="pytorchjob-port",
    port=23456,
    add_default_port=True,
    default_restart_policy="OnFailure",
    controller_name="pytorchjob-controller",
    framework="pytorch",
    master_types=("Master",),
    worker0_is_master_fallback=True,
    worker_type="Worker",
    single_replica_types=("Master",),
    positive_replica_types=("Worker",),
    scalable=True,
    extra_children=(ChildType("autoscaling/v2", "horizontalpodautoscalers", "InPlace"),),
)
RDZV_BACKENDS = ("c10d", "etcd", "etcd-v2")
NPROC_WORDS = ("auto", "cpu", "gpu")
# ASCII digits only: str.isdigit() also accepts "²", which int() then rejects with an exception.
POSITIVE_INT = re.compile(r"0*[1-9][0-9]*")


class RDZVConf(Model):
    key: str | None = optional("Rendezvous configuration key.")
    value: str | None = optional("Rendezvous configuration value.")


class ElasticPolicy(Model):
    min_replicas: int | None = optional(
        "Lower bound of Worker replicas (torchrun --nnodes min).", "minReplicas"
    )
    max_replicas: int | None = optional(
        "Upper bound of Worker replicas (torchrun --nnodes max).", "maxReplicas"
    )
    rdzv_backend: str | None = optional("Rendezvous backend: c10d, etcd or etcd-v2.", "rdzvBackend")
    rdzv_port: int | None = optional("Rendezvous port; defaults to the Worker's pytorchjob-port.", "rdzvPort")
    rdzv_host: str | None = optional("Rendezvous host; defaults to <job>-worker-0.", "rdzvHost")
    rdzv_id: str | None = optional("Rendezvous id (PET_RDZV_ID).", "rdzvId")
    rdzv_conf: list[RDZVConf] | None = optional("Extra rendezvous configuration (PET_RDZV_CONF).", "rdzvConf")
    standalone: bool | None = optional("Start a local standalone rendezvous backend (PET_STANDALONE).")
    n_proc_per_node: int | None = optional("Deprecated: use spec.nprocPerNode.", "nProcPerNode")
    max_restarts: int | None = optional("torchrun --max-restarts (PET_MAX_RESTARTS).", "maxRestarts")
    metrics: list[dict[str, Any]] | None = optional(
        "autoscaling/v2 MetricSpecs; when set an HorizontalPodAutoscaler scales the Worker replicas."
    )


class PyTorchJobSpec(Model):
    run_policy: RunPolicy | None = optional("Run policy of the job.", "runPolicy")
    elastic_policy: ElasticPolicy | None = optional("torchrun elastic training.", "elasticPolicy")
    pytorch_replica_specs: ReplicaSpecs = Field(description="Master and Worker.", alias="pytorchReplicaSpecs")
    nproc_per_node: str | None = optional("Processes per pod: auto, cpu, gpu or an integer.", "nprocPerNode")


class PyTorch(Framework):
    info = PYTORCHJOB
    spec_model = PyTorchJobSpec
    deleted_job_reason = "SuccessfulDeletePod"
    warns_restarting_only_when_short = True

    def trainjob_env(self, nodes: TrainerNodes) -> list[Json]:
        # torchrun's own flags as PET_*; "auto" lets torchrun count the GPUs, which a CPU node has none of.
        nproc: str | int = "auto" if nodes.num_proc_per_node is None else nodes.num_proc_per_node
        if nproc == "auto" and nodes.gpus_per_node == 0:
            nproc = max(1, nodes.cpus_per_node)
        return [
            env("PET_NNODES", nodes.num_nodes),
            env("PET_NPROC_PER_NODE", nproc),
            completion_index_env("PET_NODE_RANK"),
            env("PET_MASTER_ADDR", nodes.first_node),
            env("PET_MASTER_PORT", TRAINJOB_PORT),
        ]

    # torchrun sets these for each process it starts, from the PET_* variables.
    trainjob_launcher_env = frozenset(
        {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE",
         "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
         "TORCHELASTIC_RUN_ID"}
    )  # fmt: skip

    trainjob_node_types = ("Master", "Worker")

    def trainjob_trainer(self, spec: Json, command_changed: bool) -> tuple[Json, list[str]]:
        nproc = spec.get("nprocPerNode")
        trainer: Json = {}
        if isinstance(nproc, int) and not isinstance(nproc, bool):
            trainer["numProcPerNode"] = nproc
        elif command_changed:
            # The v1 pods ran one process each; torchrun starts as many as numProcPerNode says.
            trainer["numProcPerNode"] = 1
        lost = []
        if spec.get("elasticPolicy") is not None:
            lost.append("spec.elasticPolicy: a TrainJob's node count is fixed; it has no elastic policy")
        return trainer, lost

    def trainjob_command(self, command: list[str]) -> tuple[list[str], str | None]:
        # Trainer gives torchrun's PET_* variables only; a script started by python reads the v1
        # contract (RANK, WORLD_SIZE, MASTER_ADDR), which torchrun sets from them.
        if (
            len(command) >= 2
            and PYTHON.fullmatch(command[0])
            and (command[1] == "-m" or not command[1].startswith("-"))
        ):
            why = (
                f"{command[0]} -> torchrun, which sets RANK, WORLD_SIZE and MASTER_ADDR from Trainer's "
                "PET_* variables"
            )
            return ["torchrun", *command[1:]], why
        return command, None

    def default_spec(self, spec: Json) -> Json:
        spec = default_elastic_bounds(spec, replicas_of(spec, self.info.replica_field, "Worker"))
        elastic = spec.get("elasticPolicy")
        deprecated_nproc = isinstance(elastic, dict) and elastic.get("nProcPerNode") is not None
        if spec.get("nprocPerNode") is None and not deprecated_nproc:
            return {**spec, "nprocPerNode": "auto"}
        return spec

    def check_spec(self, spec: Json, result: Result) -> None:
        nproc = spec.get("nprocPerNode")
        if isinstance(nproc, str) and nproc not in NPROC_WORDS and not POSITIVE_INT.fullmatch(nproc):
            result.error(
                "spec.nprocPerNode",
                f'Invalid value: "{nproc}": must be "auto", "cpu", "gpu" or a positive integer such as "4"',
            )
        if nproc in ("auto", "gpu"):
            self._check_devices(spec, nproc, result)
        elastic = spec.get("elasticPolicy")
        if not isinstance(elastic, dict):
            return
        replicas: Any = spec.get(self.info.replica_field)
        if isinstance(replicas, dict) and not any(self.info.canonical_type(k) == "Worker" for k in replicas):
            result.error(
                f"spec.{self.info.replica_field}[Worker]",
                "Required value: must be configured if elastic policy is used",
            )
        check_elastic_bounds(result, elastic)
        check_enum(result, "spec.elasticPolicy.rdzvBackend", elastic.get("rdzvBackend"), RDZV_BACKENDS)
        if elastic.get("nProcPerNode") is not None:
            result.warnings.append("spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode")
            if nproc is not None:
                result.error(
                    "spec.elasticPolicy.nProcPerNode",
                    "Forbidden: must not be used with spec.nprocPerNode; remove one of them",
                )

    def _check_devices(self, spec: Json, nproc: str, result: Result) -> None:
        """Warn where torchrun will resolve the word to the wrong number of processes: it counts CUDA
        devices only (docs/accelerators.md#device-resources)."""
        replicas = spec.get(self.info.replica_field)
        if not isinstance(replicas, dict):
            return
        seen_by_torchrun = False
        for key, rspec in replicas.items():
            pod_spec = dig(rspec, "template", "spec") if isinstance(rspec, dict) else None
            containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
            if not isinstance(containers, list):
                continue
            for name, count in devices.pod_devices(containers).items():
                found = devices.device(name)
                if found is None or found.torchrun_counts:
                    seen_by_torchrun = True
                    continue
                fallback = "one process per CPU" if nproc == "auto" else "an error: no CUDA device"
                result.warnings.append(
                    f"spec.{self.info.replica_field}[{key}]: its pods ask for {count} {name}, which "
                    f'torchrun\'s nprocPerNode "{nproc}" does not count (it sees CUDA devices only, so it '
                    f'means {fallback}); set spec.nprocPerNode to "{count}" for one process per device'
                )
        if nproc == "gpu" and not seen_by_torchrun:
            result.warnings.append(
                'spec.nprocPerNode: "gpu" makes torchrun fail unless the pod sees a CUDA device, and no '
                'replica asks for one; request GPUs (e.g. trainop.dev/accelerator.Worker) or use "auto"'
            )

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
