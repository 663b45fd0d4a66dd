"""Validation of kubeflow.org/v1 jobs: the rules every kind shares, then the kind's own (its framework).

Every error names the field path (Kubeflow's `spec.<map>[<Type>]...` form), says what is wrong and what
is allowed, so a user can fix the YAML from the message alone. Validation accepts both the raw and the
defaulted form of a job: the apiserver runs our defaulting webhook first, a job created before the
webhook existed reaches the sync hook raw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from trainop.api import constants as c
from trainop.api.checks import Result, check_enum, check_non_negative, quote_all
from trainop.api.devices import check_resource_claims
from trainop.api.jsonpath import dig
from trainop.api.kinds import KindInfo
from trainop.extensions import Resolved, ours, resolve
from trainop.extensions.base import PREFIX, Draft
from trainop.frameworks import FRAMEWORKS, KINDS
from trainop.frameworks.base import Framework
from trainop.job.context import JobContext
from trainop.job.observed import ObservedPod
from trainop.job.settings import Settings
from trainop.jsontypes import Json
from trainop.suggest import did_you_mean

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_LABEL_MAX = 63
# Far above any real job; it bounds the work of one sync (a job of 10,000 pods syncs in seconds).
MAX_REPLICAS = 10_000
# The apiserver appends five random characters to generateName.
GENERATED_SUFFIX = 5
# The most JSON a job's children (pods, Services, the kind's other objects) may take in one sync answer.
# Each child's environment can grow with the replicas (TF_CONFIG and MX_CONFIG list every replica in
# every pod, XGBoost's WORKER_ADDRS every worker), so the answer grows with their square. Bounded so that
# (a) the job's resync, in which Metacontroller sends every pod back twice (spec and last-applied
# annotation) with its status, stays under the hook's default 128 MiB body limit, and (b) one sync of
# the largest job stays far below a hook pod's memory limit (bench/bounds_bench.py). A 1000-replica TFJob
# as our benches and load tests run it implies ~37 MiB.
MAX_CHILDREN_BYTES = 48 * 1024 * 1024
# Bytes each pod adds to its template and environment (name, labels, ownerReference, restartPolicy) and
# each headless Service takes, rounded up from what children.py builds.
POD_OVERHEAD_BYTES = 700
SERVICE_BYTES = 700


def validate(job: Json, old: Json | None = None, extensions: Resolved | None = None) -> Result:
    """Validate `job` (CREATE), or the transition `old` -> `job` (UPDATE); `extensions` is what admission
    resolved for `job` (resolved here when a caller validates a job it did not admit)."""
    result = Result()
    # Before the metadata-only shortcut: a label that is not a string is wrong on any update.
    _check_string_maps(job, result)
    if (
        old is not None
        and dig(old, "spec") == dig(job, "spec")
        and old.get("kind") == job.get("kind")
        and ours(old) == ours(job)
    ):
        # Metadata-only updates (labels, finalizers, deletion) must pass even for a job that was
        # admitted before the webhook existed and would fail validation today. Our annotations are
        # not metadata to us: a changed one is checked like a changed spec.
        return result
    kind = job.get("kind")
    fw = FRAMEWORKS.get(kind) if isinstance(kind, str) else None
    if fw is None:
        result.error("kind", f"unsupported kind {kind!r}: supported kinds are {quote_all(KINDS)}")
        return result
    info = fw.info
    if job.get("apiVersion") != c.API_VERSION:
        result.error("apiVersion", f'must be "{c.API_VERSION}", got {job.get("apiVersion")!r}')
    if info.deprecated:
        result.warnings.append(info.deprecated)
    spec = job.get("spec")
    if not isinstance(spec, dict):
        result.error("spec", "Required value: the job has no spec object")
        return result
    _check_types(fw, spec, result)
    replicas = spec.get(info.replica_field)
    root = f"spec.{info.replica_field}"
    if not isinstance(replicas, dict) or not replicas:
        result.error(root, f"Required value: add at least one replica spec ({quote_all(info.replica_types)})")
    else:
        _check_replica_map(fw, replicas, root, result)
    _check_name(info, job, replicas if isinstance(replicas, dict) else {}, result)
    run_policy = spec.get("runPolicy")
    if isinstance(run_policy, dict):
        _check_run_policy(run_policy, result)
    fw.check_spec(spec, result)
    (resolve(job)[1] if extensions is None else extensions).validate(Draft(job), result)
    if old is not None:
        _check_update(info, old, job, result)
    if result.ok:
        # Only a job that is otherwise valid can be built into a context to be measured.
        _check_children_bytes(fw, job, result)
    if result.ok:
        _check_each_child_fits(fw, job, result)
    return result


# Metacontroller creates a child with its whole JSON in an annotation, and the apiserver refuses an
# object whose annotations total more than 256 KiB: a larger child is never created, and its job never
# starts. The margin holds the child's own annotations, which the copy carries twice.
MAX_CHILD_BYTES = 256 * 1024 - 16 * 1024


def largest_extra_child_bytes(fw: Framework, job: Json) -> tuple[int, str]:
    """The JSON bytes (as Go writes them: `<`, `>` and `&` escaped) and name of the largest of the kind's
    other children once every pod of `job` exists and runs (an MPIJob's hostfile and Role then name
    every worker)."""
    uid = str(job["metadata"].get("uid") or "admission")
    ctx = JobContext(fw.info, {**job, "metadata": {**job["metadata"], "uid": uid}}, Settings())
    try:
        if not fw.extra_children(ctx, [], True):
            return 0, ""  # most kinds have none: no need to picture a 10,000-pod job at every sync
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return 0, ""  # as _generated_size: the sync refuses such a job before building anything
    owner = [{"controller": True, "uid": uid}]
    pods = [
        ObservedPod(
            {
                "metadata": {
                    "name": fw.info.pod_name(ctx.name, rtype, index),
                    "labels": {c.LABEL_REPLICA_TYPE: rtype.lower(), c.LABEL_REPLICA_INDEX: str(index)},
                    "ownerReferences": owner,
                },
                "status": {"phase": "Running"},
            }
        )
        for rtype in ctx.replica_specs
        for index in range(ctx.replicas(rtype))
    ]
    largest, name = 0, ""
    for child in fw.extra_children(ctx, pods, True):
        raw = orjson.dumps(child)
        size = len(raw) + 5 * (raw.count(b"<") + raw.count(b">") + raw.count(b"&"))
        if size > largest:
            largest, name = size, f"{child['kind']} {child['metadata']['name']}"
    return largest, name


def _widest_type(info: KindInfo, job: Json) -> tuple[str, int]:
    """The replica type (as the job spells it) with the most replicas, and their number."""
    replicas = job["spec"][info.replica_field]
    counts = {k: _replica_count(info, info.canonical_type(k) or k, r) for k, r in replicas.items()}
    key = max(counts, key=lambda k: counts[k])
    return key, counts[key]


def _check_each_child_fits(fw: Framework, job: Json, result: Result) -> None:
    size, name = largest_extra_child_bytes(fw, job)
    if size <= MAX_CHILD_BYTES:
        return
    info = fw.info
    key, count = _widest_type(info, job)
    fits = _most_replicas(
        job, info, key, count, lambda j: largest_extra_child_bytes(fw, j)[0] <= MAX_CHILD_BYTES
    )
    advice = f"use at most {fits} {key} replicas per job" if fits > 0 else "shorten the job's name"
    result.error(
        f"spec.{info.replica_field}[{key}].replicas",
        f"Invalid value: {count}: the job's {name} would be {size} bytes, and Metacontroller copies a "
        f"child into an annotation the apiserver caps at 256 KiB (with room for its other annotations, "
        f"{MAX_CHILD_BYTES} bytes), so it could never be created; {advice}",
    )


def implied_children_bytes(fw: Framework, job: Json) -> int:
    """An estimate of the JSON bytes of the children a valid `job` implies, found without building them.

    Per replica type: its replicas times (the pod template + the framework's environment and init
    containers of its first and last pod, whichever is larger + the pod's and its Service's own fields),
    plus the kind's other children. Linear in the replicas even for kinds whose answer is quadratic."""
    parts = implied_parts(fw, job)
    service = SERVICE_BYTES if fw.has_services else 0
    return parts.extra + sum(
        count * (size + POD_OVERHEAD_BYTES + service) for count, size in parts.replicas.values()
    )


@dataclass(frozen=True)
class ImpliedParts:
    """What a job's children are made of, measured without building them: `extra`, the kind's other
    children; per replica type, its replicas and the size of one pod's template and generated parts
    (environment and init containers of its first or last pod, the larger)."""

    extra: int
    replicas: dict[str, tuple[int, int]]


def implied_parts(fw: Framework, job: Json, measure: Callable[[bytes], int] = len) -> ImpliedParts:
    """The parts of the children `job` implies, each JSON document sized by `measure` (bytes by default)."""
    ctx = JobContext(fw.info, job, Settings())
    extra = _generated_size(lambda: [fw.extra_children(ctx, [], True)], measure)
    replicas: dict[str, tuple[int, int]] = {}
    for rtype, rspec in ctx.replica_specs.items():
        count = ctx.replicas(rtype)
        if count <= 0:
            continue
        generated = max(_pod_generated_size(fw, ctx, rtype, i, measure) for i in {0, count - 1})
        replicas[rtype] = (count, measure(orjson.dumps(rspec["template"])) + generated)
    return ImpliedParts(extra, replicas)


def _pod_generated_size(
    fw: Framework, ctx: JobContext, rtype: str, index: int, measure: Callable[[bytes], int]
) -> int:
    """The environment (in every container that gets it) and init containers of one pod."""
    targets = len(fw.env_container_indexes(ctx, rtype, ctx.containers(rtype)))
    return _generated_size(
        lambda: [fw.env(ctx, rtype, index)] * targets + [fw.init_containers(ctx, rtype, index)], measure
    )


def _generated_size(build: Callable[[], list[Any]], measure: Callable[[bytes], int]) -> int:
    """The size of what a framework generates, or 0 if it cannot read the job's templates.

    Validation does not look inside pod templates (the CRD schema does, on a cluster); a template the
    framework cannot read (a port that is not an object, say) makes the sync refuse the job with a 400
    before anything is built, so there is nothing to bound."""
    try:
        return sum(measure(orjson.dumps(part)) for part in build())
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return 0


def _check_children_bytes(fw: Framework, job: Json, result: Result) -> None:
    implied = implied_children_bytes(fw, job)
    if implied <= MAX_CHILDREN_BYTES:
        return
    info = fw.info
    key, count = _widest_type(info, job)
    fits = _most_replicas_that_fit(fw, job, key, count)
    replicas = job["spec"][info.replica_field]
    pods = sum(_replica_count(info, info.canonical_type(k) or k, r) for k, r in replicas.items())
    advice = (
        f"use at most {fits} {key} replicas per job (split the training into several jobs)"
        if fits > 0
        else "shrink the pod templates"
    )
    result.error(
        f"spec.{info.replica_field}[{key}].replicas",
        f"Invalid value: {count}: the job's {pods} pods and their Services would take "
        f"~{implied / 2**20:.1f} MiB in one sync answer, over the {MAX_CHILDREN_BYTES >> 20} MiB one job "
        f"may imply (each pod carries its template and the environment {info.kind} generates, which may "
        f"name every replica); {advice}",
    )


def _most_replicas_that_fit(fw: Framework, job: Json, key: str, count: int) -> int:
    """The most replicas of `key` (others unchanged) for which the job stays within MAX_CHILDREN_BYTES."""
    return _most_replicas(
        job, fw.info, key, count, lambda j: implied_children_bytes(fw, j) <= MAX_CHILDREN_BYTES
    )


def _most_replicas(job: Json, info: KindInfo, key: str, count: int, ok: Callable[[Json], bool]) -> int:
    """The most replicas of `key` (others unchanged, fewer than `count`) for which `ok` holds, or 0."""
    spec = job["spec"]
    field = info.replica_field

    def fits(n: int) -> bool:
        replicas = {**spec[field], key: {**spec[field][key], "replicas": n}}
        return ok({**job, "spec": {**spec, field: replicas}})

    lo, hi = 0, count  # fits(hi) is False
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo if lo > 0 and fits(lo) else 0


def _check_types(fw: Framework, spec: Json, result: Result) -> None:
    """Report fields of the wrong JSON type (the CRD schema does this on a cluster, not locally)."""
    try:
        fw.spec_model.model_validate(spec)
    except ValidationError as exc:
        for err in exc.errors():
            path = _error_path(fw.info, err["loc"])
            if err["type"] == "missing":
                result.error(path, "Required value: must be set")
            else:
                result.error(path, f"Invalid value: {err.get('input')!r}: {err['msg'].lower()}")


def _error_path(info: KindInfo, loc: tuple[int | str, ...]) -> str:
    path = "spec"
    for i, part in enumerate(loc):
        if isinstance(part, int) or (i > 0 and loc[i - 1] == info.replica_field):
            path += f"[{part}]"
        else:
            path += f".{part}"
    return path


def _replica_count(info: KindInfo, rtype: str, rspec: Json) -> int:
    value = rspec.get("replicas")
    return value if isinstance(value, int) else info.replicas_default(rtype)


def _check_replica_map(fw: Framework, replicas: Json, root: str, result: Result) -> None:
    info = fw.info
    seen: dict[str, str] = {}
    for key, rspec in replicas.items():
        canonical = info.canonical_type(key)
        path = f"{root}[{key}]"
        if canonical is None:
            result.error(
                path,
                f'Unsupported value: "{key}": supported replica types: {quote_all(info.replica_types)}'
                f"{did_you_mean(key, info.replica_types)}",
            )
            continue
        if canonical in seen:
            result.error(
                path,
                f'Duplicate value: "{key}" and "{seen[canonical]}" name the same replica type {canonical}; '
                "keep only one of them",
            )
            continue
        seen[canonical] = key
        if not isinstance(rspec, dict):
            result.error(path, "Required value: must be a replica spec object with a pod template")
            continue
        _check_replica(fw, canonical, rspec, path, result)
    for required in info.required_types:
        if required not in seen:
            result.error(
                root,
                f"Required value: must contain exactly one {required} (found none); "
                f"add a {required} replica spec",
            )
    present = [t for t in info.exclusive_types if t in seen]
    if len(present) > 1:
        result.error(
            root,
            f"Forbidden: must not have more than one of {quote_all(info.exclusive_types)} "
            f"(found {quote_all(seen[t] for t in present)}); keep one",
        )


def _check_replica(fw: Framework, rtype: str, rspec: Json, path: str, result: Result) -> None:
    info = fw.info
    count = rspec.get("replicas")
    if isinstance(count, int):
        if count < 0:
            result.error(f"{path}.replicas", f"Invalid value: {count}: must be greater than or equal to 0")
        elif count > MAX_REPLICAS:
            result.error(
                f"{path}.replicas",
                f"Invalid value: {count}: must be at most {MAX_REPLICAS}; one job's pods are managed in one "
                "sync, so split a larger training into several jobs",
            )
        elif rtype in info.single_replica_types and count != 1:
            result.error(f"{path}.replicas", f"Forbidden: {rtype} must have exactly 1 replica, got {count}")
        elif rtype in info.positive_replica_types and count < 1:
            result.error(f"{path}.replicas", f"Forbidden: must be at least 1, got {count}")
    policy = rspec.get("restartPolicy")
    if policy not in (None, "", *c.RESTART_POLICIES):
        result.error(
            f"{path}.restartPolicy",
            f'Unsupported value: "{policy}": supported values: {quote_all(c.RESTART_POLICIES)}',
        )
    template = rspec.get("template")
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    cpath = f"{path}.template.spec.containers"
    if not isinstance(containers, list) or not containers:
        result.error(cpath, f'Required value: add a container named "{info.default_container}" with an image')
        return
    names = []
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            result.error(f"{cpath}[{i}]", "Invalid value: must be a container object")
            continue
        names.append(container.get("name"))
        if not container.get("name"):
            result.error(f"{cpath}[{i}].name", "Required value: every container needs a name")
        if not container.get("image"):
            result.error(f"{cpath}[{i}].image", "Required value: every container needs an image")
    if fw.requires_default_container and info.default_container not in names:
        result.error(
            cpath,
            f'Required value: must have at least one container named "{info.default_container}" '
            f"(found {quote_all(str(n) for n in names)}); the operator injects its environment "
            "and port into that container",
        )
    if isinstance(pod_spec, dict):
        check_resource_claims(pod_spec, f"{path}.template.spec", result)
    if isinstance(pod_spec, dict) and pod_spec.get("restartPolicy"):
        result.warnings.append(
            f"{path}.template.spec.restartPolicy is ignored; set {path}.restartPolicy instead"
        )


def child_names(info: KindInfo, name: str, replicas: Json) -> list[str]:
    """The longest child name per replica type that a job of this name produces."""
    names = [f"{name}-{suffix}" for suffix in info.extra_child_suffixes]
    for key, rspec in replicas.items():
        rtype = info.canonical_type(key)
        if rtype is None or not isinstance(rspec, dict):
            continue
        count = _replica_count(info, rtype, rspec)
        if count > 0:
            names.append(info.pod_name(name, rtype, count - 1))
    return names


def _check_name(info: KindInfo, job: Json, replicas: Json, result: Result) -> None:
    meta = job.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = meta.get("name")
    if not name and meta.get("generateName"):
        # Check the longest name the apiserver may generate.
        name = str(meta["generateName"]) + "x" * GENERATED_SUFFIX
    if not isinstance(name, str) or not name:
        result.error("metadata.name", "Required value: the job needs a name")
        return
    if not DNS1035.match(name):
        result.error(
            "metadata.name",
            f'Invalid value: "{name}": must be a DNS-1035 label: lowercase letters, digits and "-", '
            'starting with a letter and ending with a letter or digit (e.g. "my-job")',
        )
        return
    too_long = [n for n in [*child_names(info, name, replicas), name] if len(n) > DNS_LABEL_MAX]
    if too_long:
        longest = max(too_long, key=len)
        allowed = DNS_LABEL_MAX - (len(longest) - len(name))
        result.error(
            "metadata.name",
            f'Invalid value: "{name}": the child name "{longest}" would be {len(longest)} characters, '
            f"over the {DNS_LABEL_MAX}-character DNS label limit; use a name of at most {allowed} characters",
        )


def _check_string_maps(job: Json, result: Result) -> None:
    """Labels and annotations map strings to strings, the only shape the apiserver stores.

    A job from the apiserver has no other, so what this finds comes from a hand-made review or a
    `trainop run` file. Denied here, such a job never reaches the sync hook, which would answer every
    sync of it with a 400 (hooks/request.py) and could never bring it up."""
    meta = job.get("metadata")
    if not isinstance(meta, dict):
        return  # _check_name reports it
    for key, singular in (("labels", "label"), ("annotations", "annotation")):
        values = meta.get(key)
        if values is None:
            continue
        if not isinstance(values, dict):
            result.error(f"metadata.{key}", f"Invalid value: {_short(values)}: must map strings to strings")
            continue
        for name, value in values.items():
            # The extensions report their own annotations (trainop.extensions.Resolved.validate).
            if not isinstance(value, str) and not (key == "annotations" and str(name).startswith(PREFIX)):
                result.error(
                    f"metadata.{key}[{name}]",
                    f"Invalid value: {_short(value)}: {singular} values are strings",
                )


def _short(value: Any, limit: int = 60) -> str:
    """A value's repr cut to `limit` characters: a hostile one may be megabytes."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_run_policy(run_policy: Json, result: Result) -> None:
    check_enum(
        result, "spec.runPolicy.cleanPodPolicy", run_policy.get("cleanPodPolicy"), c.CLEAN_POD_POLICIES
    )
    check_enum(result, "spec.runPolicy.managedBy", run_policy.get("managedBy"), c.MANAGED_BY_VALUES)
    for key in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        check_non_negative(result, f"spec.runPolicy.{key}", run_policy.get(key))
    scheduling = run_policy.get("schedulingPolicy")
    if isinstance(scheduling, dict):
        for key in ("minAvailable", "scheduleTimeoutSeconds"):
            check_non_negative(result, f"spec.runPolicy.schedulingPolicy.{key}", scheduling.get(key))


def _replica_type_set(info: KindInfo, job: Json) -> set[str]:
    replicas = dig(job, "spec", info.replica_field)
    if not isinstance(replicas, dict):
        return set()
    return {info.canonical_type(k) or k for k in replicas}


def _check_update(info: KindInfo, old: Json, new: Json, result: Result) -> None:
    for path in (("runPolicy", "managedBy"), ("runPolicy", "schedulingPolicy", "queue")):
        before, after = dig(old, "spec", *path), dig(new, "spec", *path)
        if before != after:
            result.error(
                "spec." + ".".join(path),
                f"Invalid value: {json.dumps(after)}: field is immutable (was {json.dumps(before)}); "
                "create a new job instead",
            )
    before_types, after_types = _replica_type_set(info, old), _replica_type_set(info, new)
    if before_types != after_types:
        result.error(
            f"spec.{info.replica_field}",
            f"Forbidden: the set of replica types is immutable (was {quote_all(sorted(before_types))}, "
            f"now {quote_all(sorted(after_types))}); create a new job instead",
        )
