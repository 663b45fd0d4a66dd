"""TFJob: TF_CONFIG in the `tensorflow` container, chief or worker-0 success, dynamic workers."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import Field

from trainop.api.checks import Result, check_enum
from trainop.api.kinds import KindInfo
from trainop.api.models import Model, ReplicaSpecs, RunPolicy, optional
from trainop.frameworks.base import Counts, Framework, env
from trainop.job.context import JobContext
from trainop.job.observed import ObservedPod
from trainop.jsontypes import Json

TFJOB = KindInfo(
    kind="TFJob",
    plural="tfjobs",
    singular="tfjob",
    replica_field="tfReplicaSpecs",
    replica_types=("Chief", "Evaluator", "Master", "PS", "Worker"),
    default_container="tensorflow",
    port_name="tfjob-port",
    port=2222,
    add_default_port=True,
    default_restart_policy="Never",
    controller_name="tfjob-controller",
    framework="tensorflow",
    master_types=("Chief", "Master"),
    worker0_is_master_fallback=True,
    worker_type="Worker",
    single_replica_types=("Chief", "Master"),
    exclusive_types=("Chief", "Master"),
    # A PS only serves variables; in TF2 parameter-server training the workers only serve too (the chief
    # runs all of the user's program).
    default_server="tensorflow",
    server_types=("PS", "Worker"),
    parameter_server_type="PS",
)
SUCCESS_POLICIES = ("", "AllWorkers")


class TFJobSpec(Model):
    run_policy: RunPolicy | None = optional("Run policy of the job.", "runPolicy")
    success_policy: str | None = optional('"" (chief or worker 0 decides) or AllWorkers.', "successPolicy")
    tf_replica_specs: ReplicaSpecs = Field(
        description="Chief, Master, PS, Worker and Evaluator.", alias="tfReplicaSpecs"
    )
    enable_dynamic_worker: bool | None = optional(
        "Sparse TF_CONFIG; tolerate Worker failures.", "enableDynamicWorker"
    )


def _compact(obj: object) -> str:
    # Go's encoding/json output: no spaces, struct fields in declaration order, map keys sorted.
    return json.dumps(obj, separators=(",", ":"))


class TensorFlow(Framework):
    info = TFJOB
    spec_model = TFJobSpec
    qualified_messages = True
    # TFJob's UpdateJobStatus keeps the Restarting condition ReconcilePods set and records no event of
    # its own.
    warns_restarting = False

    def default_spec(self, spec: Json) -> Json:
        return spec if "successPolicy" in spec else {**spec, "successPolicy": ""}

    def check_spec(self, spec: Json, result: Result) -> None:
        check_enum(result, "spec.successPolicy", spec.get("successPolicy"), SUCCESS_POLICIES)

    def env_container_indexes(self, ctx: JobContext, rtype: str, containers: Sequence[Json]) -> list[int]:
        return [i for i, c in enumerate(containers) if c.get("name") == self.info.default_container]

    def _address(self, ctx: JobContext, rtype: str, index: int) -> str:
        return f"{ctx.fqdn(rtype, index)}:{ctx.port(rtype, index)}"

    def env(self, ctx: JobContext, rtype: str, index: int) -> list[Json]:
        if ctx.total_replicas() == 1:
            return []  # a single-process job is not distributed: TensorFlow must not wait for peers
        task = {"type": rtype.lower(), "index": index}
        if ctx.spec.get("enableDynamicWorker"):
            ps = [self._address(ctx, "PS", i) for i in range(ctx.replicas("PS"))]
            if rtype == "Worker":
                sparse: Json = {"worker": {str(index): self._address(ctx, rtype, index)}, "ps": ps}
            elif rtype == "PS":
                sparse = {"worker": {}, "ps": [self._address(ctx, rtype, index)]}
            else:
                sparse = {"worker": {}, "ps": []}
            return [env("TF_CONFIG", _compact({"cluster": sparse, "task": task}))]
        # The cluster is the same in every pod: encoded once per sync, not once per pod (O(n) not O(n^2)).
        cluster = ctx.memo.get("tf_cluster")
        if cluster is None:
            cluster = ctx.memo["tf_cluster"] = _compact(
                {
                    t.lower(): [self._address(ctx, t, i) for i in range(ctx.replicas(t))]
                    for t in sorted(ctx.replica_specs, key=str.lower)
                }
            )
        # Byte for byte what _compact({"cluster": ..., "task": ..., "environment": "cloud"}) writes.
        config = f'{{"cluster":{cluster},"task":{_compact(task)},"environment":"cloud"}}'
        return [env("TF_CONFIG", config)]

    def succeeded(self, ctx: JobContext, counts: dict[str, Counts], pods: Sequence[ObservedPod]) -> bool:
        if super().succeeded(ctx, counts, pods):
            return True
        chief = any(ctx.has(t) for t in self.info.master_types)
        if chief or ctx.spec.get("successPolicy") == "AllWorkers":
            return False
        worker0 = next((p for p in pods if p.name == self.info.pod_name(ctx.name, "Worker", 0)), None)
        return bool(
            worker0 and worker0.phase == "Succeeded" and worker0.exit_code(self.info.default_container) == 0
        )

    def failed_message(self, ctx: JobContext, rtype: str, n: int) -> str:
        return f"TFJob {ctx.namespace}/{ctx.name} has failed because {n} {rtype} replica(s) failed."

    def tolerates_failure(self, ctx: JobContext, rtype: str) -> bool:
        return rtype == "Worker" and bool(ctx.spec.get("enableDynamicWorker"))
