"""The JobSet a TrainJob asks for, given its runtime: a pure function, the core of the v2 sync.

The steps follow Trainer's pipeline, because Kueue rebuilds the same JobSet in its own process to
compute quota and placement, so ours must match it field for field (docs/trainer-v2.md#the-jobset):

1. the runtime template's labels and annotations, then each runtimePatch's, label the JobSet;
2. the runtimePatches merge into the template's JobSet spec in order (strategic merge);
3. each replicatedJob becomes a pod set: its `parallelism`, or for the trainer step the mlPolicy's
   numNodes, then the TrainJob's `trainer.numNodes`; `resourcesPerNode` merges into the `node` container;
4. the mlPolicy's framework adds its env and port to the trainer's `node` container;
5. parallelism and completions follow the counts, the TrainJob's initializer and trainer fields fill
   their steps, and `suspend` is copied.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from trainop.api.quantity import parse
from trainop.frameworks import ML_POLICIES
from trainop.frameworks.base import TRAINJOB_PORT, Framework, TrainerNodes
from trainop.jsontypes import Json
from trainop.trainjob import constants as c
from trainop.trainjob.models import (
    InitializerSource,
    MLPolicy,
    RuntimePatch,
    TrainingRuntimeSpec,
    TrainJobSpec,
)
from trainop.trainjob.shapes import JobSetSpec, Metadata, Resources, check, mapping
from trainop.trainjob.strategicmerge import merge

# Trainer rewrites this command into a torchtune recipe and config, which this engine does not do.
TORCHTUNE_ENTRYPOINT = ["tune", "run"]


class UnsupportedRuntime(ValueError):
    """The runtime asks for something this engine does not build; the message names it."""


def desired_jobset(job: Json, runtime: Json) -> Json:
    """The JobSet for ``job``, a TrainJob, built from ``runtime``, its (Cluster)TrainingRuntime."""
    name = str(job["metadata"]["name"])
    spec = TrainJobSpec.model_validate(job.get("spec") or {})
    runtime_spec = TrainingRuntimeSpec.model_validate(runtime.get("spec") or {})
    policy = runtime_spec.ml_policy
    framework = policy_framework(policy)
    if runtime_spec.pod_group_policy:
        raise UnsupportedRuntime(
            "spec.podGroupPolicy: gang scheduling of TrainJobs is not built by this version; "
            "remove it from the runtime"
        )
    if spec.trainer is not None and spec.trainer.command == TORCHTUNE_ENTRYPOINT:
        raise UnsupportedRuntime(
            "spec.trainer.command: torchtune's `tune run` is not built by this version; "
            "run torchtune through torchrun instead"
        )
    template = runtime_spec.template
    patches = spec.runtime_patches or []

    check(Metadata, mapping(template.get("metadata")), "runtime spec.template.metadata")
    if spec.trainer is not None and spec.trainer.resources_per_node is not None:
        check(Resources, spec.trainer.resources_per_node, "spec.trainer.resourcesPerNode")
    jobset_spec = patched_spec(mapping(template.get("spec")), patches)
    check(JobSetSpec, jobset_spec, "runtime spec.template.spec, runtimePatches merged")
    rjobs: list[Json] = jobset_spec.get("replicatedJobs") or []
    counts = [_pod_count(rjob, policy, spec) for rjob in rjobs]
    for rjob in _trainer_steps(rjobs, policy):
        _merge_resources(rjob, spec)

    trainer_index = next((i for i, rjob in enumerate(rjobs) if _ancestor(rjob) == c.ANCESTOR_TRAINER), None)
    trainer = rjobs[trainer_index] if trainer_index is not None else None
    nodes = _trainer_nodes(name, counts[trainer_index] if trainer_index is not None else 1, trainer, spec)
    node = _container(trainer, c.NODE) if trainer is not None else None
    if node is not None and spec.trainer is not None:
        _enforce_policy(node, framework, nodes, spec)
    if framework is not None and policy is not None and policy.torch is not None:
        # Unlike the trainer's own env, the extra targets get it whether or not the job sets `trainer`.
        _inject_torch_env(rjobs, policy, framework, nodes)

    for rjob, count in zip(rjobs, counts, strict=True):
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = count
        job_spec["completions"] = count
        ancestor = _ancestor(rjob)
        if ancestor in (c.DATASET_INITIALIZER, c.MODEL_INITIALIZER):
            rjob["replicas"] = 1
            _fill_initializer(rjob, ancestor, spec)
        if ancestor == c.ANCESTOR_TRAINER:
            rjob["replicas"] = 1
            _fill_trainer(rjob, spec)
    if spec.suspend is not None:
        jobset_spec["suspend"] = spec.suspend
    for rjob in rjobs:
        _typed_shape(rjob)

    metadata: Json = {"name": name, "namespace": job["metadata"].get("namespace")}
    labels, annotations = propagated_metadata(mapping(template.get("metadata")), patches)
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": c.JOBSET_API_VERSION, "kind": "JobSet", "metadata": metadata, "spec": jobset_spec}


def policy_framework(policy: MLPolicy | None) -> Framework | None:
    """The framework of the runtime's mlPolicy; None for a runtime without one (plain ML)."""
    if policy is None:
        return None
    for source in ("mpi", "flux"):
        if getattr(policy, source) is not None:
            raise UnsupportedRuntime(
                f"spec.mlPolicy.{source}: runtimes with the {source} policy are not built by this version; "
                f"use a torch, jax, xgboost or plain runtime"
            )
    chosen = [key for key in ML_POLICIES if getattr(policy, key) is not None]
    return ML_POLICIES[chosen[0]] if chosen else None


def propagated_metadata(template_metadata: Json, patches: Sequence[RuntimePatch]) -> tuple[Json, Json]:
    """The JobSet's labels and annotations: the runtime template's, then each patch's over them."""
    labels = dict(template_metadata.get("labels") or {})
    annotations = dict(template_metadata.get("annotations") or {})
    for i, patch in enumerate(patches):
        meta = mapping(_patch_template(patch).get("metadata"))
        check(Metadata, meta, f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.metadata")
        labels.update(meta.get("labels") or {})
        annotations.update(meta.get("annotations") or {})
    return labels, annotations


def _patch_template(patch: RuntimePatch) -> Json:
    return mapping(mapping(patch.training_runtime_spec).get("template"))


def patched_spec(spec: Json, patches: Sequence[RuntimePatch]) -> Json:
    """The runtime's JobSet spec with each patch's `template.spec` merged in, in the runtime's order."""
    rjobs = spec.get("replicatedJobs")
    order = {mapping(r).get("name"): i for i, r in enumerate(rjobs if isinstance(rjobs, list) else [])}
    merged = copy.deepcopy(spec)
    for patch in patches:
        spec_patch = mapping(_patch_template(patch).get("spec"))
        if spec_patch:
            merged = merge(merged, spec_patch)
    if isinstance(merged.get("replicatedJobs"), list):
        merged["replicatedJobs"] = sorted(
            merged["replicatedJobs"], key=lambda r: order.get(mapping(r).get("name"), 0)
        )
    return merged


# ---- pod sets ---------------------------------------------------------------------------------------


def _ancestor(rjob: Json) -> str | None:
    labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}
    value = labels.get(c.LABEL_ANCESTOR)
    return str(value) if value is not None else None


def _pod_count(rjob: Json, policy: MLPolicy | None, spec: TrainJobSpec) -> int:
    count = int(((rjob.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
    is_trainer = _ancestor(rjob) == c.ANCESTOR_TRAINER
    if is_trainer and policy is not None:
        count = policy.num_nodes if policy.num_nodes is not None else 1
    count = max(count, 1)
    if is_trainer and spec.trainer is not None and spec.trainer.num_nodes is not None:
        count = spec.trainer.num_nodes
    return count


def _trainer_steps(rjobs: Sequence[Json], policy: MLPolicy | None) -> Iterator[Json]:
    # resourcesPerNode sizes the trainer step only when the runtime names a framework.
    if policy is not None:
        yield from (rjob for rjob in rjobs if _ancestor(rjob) == c.ANCESTOR_TRAINER)


def _pod_spec(rjob: Json) -> Json:
    job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
    pod_spec: Json = job_spec.setdefault("template", {}).setdefault("spec", {})
    return pod_spec


def _container(rjob: Json, name: str, *, init_too: bool = False) -> Json | None:
    pod = _pod_spec(rjob)
    lists = ("containers", "initContainers") if init_too else ("containers",)
    for key in lists:
        for container in pod.get(key) or []:
            if container.get("name") == name:
                found: Json = container
                return found
    return None


def _merge_resources(rjob: Json, spec: TrainJobSpec) -> None:
    if spec.trainer is None or spec.trainer.resources_per_node is None:
        return
    node = _container(rjob, c.NODE)
    if node is not None:
        node["resources"] = merge(node.get("resources") or {}, spec.trainer.resources_per_node)


def _trainer_nodes(name: str, count: int, trainer: Json | None, spec: TrainJobSpec) -> TrainerNodes:
    node = _container(trainer, c.NODE) if trainer is not None else None
    resources: Json = (node or {}).get("resources") or {}
    if spec.trainer is not None and spec.trainer.resources_per_node is not None:
        resources = spec.trainer.resources_per_node
    return TrainerNodes(
        job_name=name,
        num_nodes=count,
        gpus_per_node=_gpus(resources),
        cpus_per_node=_cpus(resources),
        num_proc_per_node=spec.trainer.num_proc_per_node if spec.trainer is not None else None,
    )


def _whole(value: Any) -> int:
    # Kubernetes' Quantity.Value(): the quantity rounded up to a whole number.
    amount: Decimal = parse(value)
    if not amount.is_finite():
        raise ValueError(f"invalid resource quantity {value!r}")
    return math.ceil(amount)


def _gpus(resources: Json) -> int:
    def first_gpu(resource_list: Json) -> int:
        for key, value in (resource_list or {}).items():
            if "gpu" in key.lower():
                return _whole(value)
        return 0

    gpus = first_gpu(resources.get("requests") or {})
    return gpus or first_gpu(resources.get("limits") or {})


def _cpus(resources: Json) -> int:
    requested = (resources.get("requests") or {}).get("cpu")
    if requested is not None and _whole(requested) != 0:
        return _whole(requested)
    limit = (resources.get("limits") or {}).get("cpu")
    return _whole(limit) if limit is not None else 0


# ---- env, ports -------------------------------------------------------------------------------------


def upsert(items: list[Json], item: Json, same: Callable[[Json, Json], bool]) -> None:
    """Replace the first item ``same`` as ``item`` in place, or append it."""
    for i, existing in enumerate(items):
        if same(existing, item):
            items[i] = item
            return
    items.append(item)


def _same_env(a: Json, b: Json) -> bool:
    return a.get("name") == b.get("name")


def _same_port(a: Json, b: Json) -> bool:
    # Trainer compares the number or the name, and two ports without a name have the same (absent) one.
    return a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name")


def upsert_env(container: Json, env: Sequence[Json]) -> None:
    items = container.setdefault("env", [])
    for e in env:
        upsert(items, copy.deepcopy(e), _same_env)


def _enforce_policy(node: Json, framework: Framework | None, nodes: TrainerNodes, spec: TrainJobSpec) -> None:
    user_env = (spec.trainer.env if spec.trainer is not None else None) or []
    if framework is None:
        upsert_env(node, user_env)
        return
    if framework.trainjob_user_env_first:
        upsert_env(node, user_env)
    upsert_env(node, framework.trainjob_env(nodes))
    upsert(node.setdefault("ports", []), {"containerPort": TRAINJOB_PORT}, _same_port)


def _inject_torch_env(
    rjobs: Sequence[Json], policy: MLPolicy, framework: Framework, nodes: TrainerNodes
) -> None:
    injection = policy.torch.env_injection if policy.torch is not None else None
    for target in (injection.targets if injection is not None else None) or []:
        rjob = next((r for r in rjobs if r.get("name") == target.job_name), None)
        for container_name in target.container_names:
            container = _container(rjob, container_name, init_too=True) if rjob is not None else None
            if container is None:
                raise UnsupportedRuntime(
                    f"spec.mlPolicy.torch.envInjection: the runtime template has no container "
                    f"{container_name!r} in replicatedJob {target.job_name!r}"
                )
            upsert_env(container, framework.trainjob_env(nodes))


def _typed_shape(rjob: Json) -> None:
    # Trainer round-trips the template through Go's typed JobSet, which writes the struct fields that
    # cannot be omitted as `{}`; Kueue's copy has them too, so ours does.
    template = rjob.setdefault("template", {})
    template.setdefault("metadata", {})
    pod_template = template.setdefault("spec", {}).setdefault("template", {})
    pod_template.setdefault("metadata", {})
    pod = pod_template.setdefault("spec", {})
    for key in ("initContainers", "containers"):
        for container in pod.get(key) or []:
            container.setdefault("resources", {})


# ---- the TrainJob's own fields ----------------------------------------------------------------------


def _fill_initializer(rjob: Json, ancestor: str, spec: TrainJobSpec) -> None:
    initializer = spec.initializer
    source: InitializerSource | None = None
    if initializer is not None:
        source = initializer.dataset if ancestor == c.DATASET_INITIALIZER else initializer.model
    container = _container(rjob, ancestor)
    if source is None or container is None:
        return
    if source.storage_uri is not None:
        upsert_env(container, [{"name": c.ENV_STORAGE_URI, "value": source.storage_uri}])
    upsert_env(container, source.env or [])
    if source.secret_ref is not None:
        container.setdefault("envFrom", []).append({"secretRef": {"name": source.secret_ref.get("name")}})


def _fill_trainer(rjob: Json, spec: TrainJobSpec) -> None:
    trainer = spec.trainer
    node = _container(rjob, c.NODE)
    if trainer is None or node is None:
        return
    if trainer.image is not None:
        node["image"] = trainer.image
    if trainer.command is not None:
        node["command"] = list(trainer.command)
    if trainer.args is not None:
        node["args"] = list(trainer.args)
    upsert_env(node, trainer.env or [])
