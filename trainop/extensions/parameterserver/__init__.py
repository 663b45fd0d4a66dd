"""The default TensorFlow server: a TFJob replica type that runs no code of the user's.

`trainop.dev/default-server.<ReplicaType>: tensorflow` on a TFJob makes every replica of that type (`PS`,
or `Worker` for TF2 parameter-server training, where the chief runs all the user's code) run
`tf_server.py` from a ConfigMap child of the job, in the replica's own image, so its TensorFlow is always
the one the rest of the job uses. Defaulting writes what will run into the replica's template (command,
volume, mount), so the stored job shows it; the ConfigMap `<job>-tf-server` is the job's child, one per
job, so an operator upgrade never changes the program of a running job.

Opt-in, so a job without the annotation runs exactly as in Kubeflow (where a PS with no command runs the
image's entrypoint). The cluster switch TRAINOP_DEFAULT_PARAMETER_SERVER=true (the chart's
`tensorflow.defaultParameterServer`, also read by `trainop run`) writes the annotation for `PS` onto
TFJobs whose PS container sets neither command nor args. When the image has no TensorFlow the program
exits with NO_TENSORFLOW and the job's Failed condition says so (docs/parameter-server.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, Final

from trainop.api.checks import Result
from trainop.api.constants import LABEL_JOB_NAME
from trainop.api.kinds import ChildType, KindInfo
from trainop.extensions.base import (
    COMPONENT_LABEL,
    PREFIX,
    Addons,
    AnnotationDoc,
    Extension,
    JobState,
    ReplicaFailure,
    annotation_path,
)
from trainop.extensions.faces import ChartValue
from trainop.extensions.parameterserver.tf_server import NO_TENSORFLOW
from trainop.frameworks import KINDS
from trainop.jsontypes import Json

ANNOTATION: Final = f"{PREFIX}default-server"
# The one server trainop ships; the kinds whose KindInfo names it may run it.
TENSORFLOW: Final = "tensorflow"
SERVERS: Final = (TENSORFLOW,)
DEFAULT_ENV: Final = "TRAINOP_DEFAULT_PARAMETER_SERVER"
SWITCH_VALUES: Final = ("true", "false")

PROGRAM: Final = "tf_server.py"
VOLUME: Final = "trainop-tf-server"
MOUNT_PATH: Final = "/opt/trainop/tf-server"
CHILD_SUFFIX: Final = "tf-server"
TERMINATION_LOG: Final = "/dev/termination-log"


def server_kinds() -> list[KindInfo]:
    return [info for info in KINDS.values() if info.default_server in SERVERS]


@cache
def program_source() -> str:
    return resources.files(__package__).joinpath(PROGRAM).read_text(encoding="utf-8")


def child_name(job_name: str) -> str:
    return f"{job_name}-{CHILD_SUFFIX}"


def server_command(container: Json) -> list[str]:
    """What a server container runs. `python3`: every TensorFlow image has it (`python` is not in all)."""
    log = container.get("terminationMessagePath") or TERMINATION_LOG
    return ["python3", f"{MOUNT_PATH}/{PROGRAM}", "--termination-log", str(log)]


def configured_default(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the cluster gives every parameter server without a command the default server."""
    value = (env.get(DEFAULT_ENV) or "false").strip().lower()
    if value not in SWITCH_VALUES:
        raise ValueError(f"{DEFAULT_ENV}={env.get(DEFAULT_ENV)!r}: must be true or false")
    return value == "true"


def key_for(rtype: str) -> str:
    return f"{ANNOTATION}.{rtype}"


def _mapping(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


def _info(job: Json) -> KindInfo | None:
    kind = job.get("kind")
    info = KINDS.get(kind) if isinstance(kind, str) else None
    return info if info is not None and info.default_server in SERVERS else None


def _replica_specs(job: Json, info: KindInfo) -> Json:
    return _mapping(_mapping(job.get("spec")).get(info.replica_field))


def _find_type(specs: Mapping[str, Any], rtype: str) -> str | None:
    """The job's own spelling of a replica type (replica-map keys match in any case)."""
    return next((k for k in specs if k.lower() == rtype.lower()), None)


def _container_index(info: KindInfo, template: Any) -> int | None:
    containers = _mapping(_mapping(template).get("spec")).get("containers")
    if not isinstance(containers, list):
        return None
    return next(
        (
            i
            for i, c in enumerate(containers)
            if isinstance(c, dict) and c.get("name") == info.default_container
        ),
        None,
    )


def _container(info: KindInfo, replica: Any) -> Json | None:
    template = _mapping(_mapping(replica).get("template"))
    index = _container_index(info, template)
    return None if index is None else dict(template["spec"]["containers"][index])


def runs_own_code(container: Json) -> bool:
    """Whether the container sets a command or args other than the default server's."""
    return bool(container.get("args")) or (
        bool(container.get("command")) and container.get("command") != server_command(container)
    )


def with_server(info: KindInfo, template: Json, job_name: str) -> Json:
    """The replica's template running the default server: command, the ConfigMap volume and its mount
    written in; the very same object when they already are (copy-on-write otherwise)."""
    spec = template["spec"]
    index = _container_index(info, template)
    assert index is not None
    container = spec["containers"][index]
    volume = {"name": VOLUME, "configMap": {"name": child_name(job_name)}}
    mount = {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    volumes = list(spec.get("volumes") or [])
    mounts = list(container.get("volumeMounts") or [])
    command = server_command(container)
    if container.get("command") == command and volume in volumes and mount in mounts:
        return template
    new_container = {
        **container,
        "command": command,
        "volumeMounts": mounts if mount in mounts else [*mounts, mount],
    }
    containers = list(spec["containers"])
    containers[index] = new_container
    new_spec = {
        **spec,
        "containers": containers,
        "volumes": volumes if volume in volumes else [*volumes, volume],
    }
    return {**template, "spec": new_spec}


def _with_cluster_default(job: Json, info: KindInfo) -> tuple[Json, str | None]:
    """`job` with the annotation for its parameter servers, and the key written, when their container
    sets neither command nor args and no annotation names them; `(job, None)` otherwise."""
    if info.parameter_server_type is None:
        return job, None
    specs = _replica_specs(job, info)
    ps = _find_type(specs, info.parameter_server_type)
    container = _container(info, specs.get(ps)) if ps is not None else None
    if container is None or container.get("command") or container.get("args"):
        return job, None
    meta = _mapping(job.get("metadata"))
    annotations = meta.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        return job, None
    key = key_for(info.parameter_server_type)
    if any(k.lower() == key.lower() for k in annotations or {}):
        return job, None
    added = {**(annotations or {}), key: info.default_server}
    return {**job, "metadata": {**meta, "annotations": added}}, key


def requested(info: KindInfo, values: Mapping[str, str], specs: Mapping[str, Any]) -> dict[str, str]:
    """{the job's replica-type key: annotation key} for every well-formed annotation naming one."""
    out = {}
    for key, value in values.items():
        rtype = key[len(ANNOTATION) + 1 :] if key.startswith(f"{ANNOTATION}.") else ""
        found = _find_type(specs, rtype) if rtype else None
        if (
            value == info.default_server
            and found is not None
            and info.canonical_type(found) in info.server_types
        ):
            out[found] = key
    return out


def _total_replicas(specs: Mapping[str, Any]) -> int:
    total = 0
    for replica in specs.values():
        n = _mapping(replica).get("replicas", 1)
        total += n if isinstance(n, int) and not isinstance(n, bool) else 1
    return total


def _either(values: tuple[str, ...]) -> str:
    return " or ".join(values)


def _doc() -> AnnotationDoc:
    kinds = server_kinds()
    which = "; ".join(f"{i.kind} {_either(i.server_types)}" for i in kinds)
    switch = ", ".join(f"{i.kind} {i.parameter_server_type}" for i in kinds if i.parameter_server_type)
    example = next((i.parameter_server_type for i in kinds if i.parameter_server_type), "<ReplicaType>")
    return AnnotationDoc(
        key=f"{ANNOTATION}.<ReplicaType>",
        value=TENSORFLOW,
        effect=f"{which} replicas (a parameter server, or a worker of TF2 parameter-server training) run "
        "a TensorFlow server (tf.distribute) for their TF_CONFIG task in their own image, from a ConfigMap "
        "child `<job>-tf-server`; the command, volume and mount are written into the template. Refused on a "
        f"container with a command or args. Written for {switch} by the chart's "
        "tensorflow.defaultParameterServer (docs/parameter-server.md)",
        example=f"{key_for(example)}: {TENSORFLOW}",
    )


class DefaultServer(Extension):
    """`trainop.dev/default-server.<ReplicaType>`, in the registry."""

    name = "default-server"
    child_types = (ChildType("v1", "configmaps", "InPlace"),)
    docs = (_doc(),)

    def __init__(self, env: Mapping[str, str] = os.environ) -> None:
        self._env = env

    def owns(self, key: str) -> bool:
        return key == ANNOTATION or key.startswith(f"{ANNOTATION}.")

    # ---- faces -----------------------------------------------------------------------------------
    chart_values = (ChartValue("tensorflow.defaultParameterServer", DEFAULT_ENV),)

    def applies_without_annotations(self) -> bool:
        try:
            return configured_default(self._env)
        except ValueError:
            return True  # so that validation reports the broken setting

    def default(self, job: Json, values: Mapping[str, str]) -> Json:
        info = _info(job)
        if info is None:
            return job
        try:
            on = configured_default(self._env)
        except ValueError:
            on = False
        if on:
            job, added = _with_cluster_default(job, info)
            if added is not None:
                values = {**values, added: info.default_server}
        specs = _replica_specs(job, info)
        new_specs = dict(specs)
        name = _mapping(job.get("metadata")).get("name")
        for rtype in requested(info, values, specs):
            replica = specs[rtype]
            container = _container(info, replica)
            if not isinstance(name, str) or container is None or runs_own_code(container):
                continue  # for validate to report
            template = replica["template"]
            new_template = with_server(info, template, name)
            if new_template is not template:
                new_specs[rtype] = {**replica, "template": new_template}
        if new_specs == specs:
            return job
        return {**job, "spec": {**job["spec"], info.replica_field: new_specs}}

    def validate(self, job: Json, values: Mapping[str, str], result: Result) -> None:
        try:
            configured_default(self._env)
        except ValueError as e:
            result.error(DEFAULT_ENV, f"{e} (the cluster's default parameter server: ask its administrator)")
        info = _info(job)
        for key, value in sorted(values.items()):
            path = annotation_path(key)
            if key == ANNOTATION:
                example = next(
                    (i.parameter_server_type for i in server_kinds() if i.parameter_server_type), ""
                )
                result.error(
                    path,
                    f"Invalid value: name the replica type in the key, e.g. {key_for(example)}: {TENSORFLOW}",
                )
                continue
            if value not in SERVERS:
                result.error(
                    path,
                    f'Unsupported value: "{value}": supported values: "{TENSORFLOW}" (the replicas run a '
                    "TensorFlow server in their own image)",
                )
                continue
            if info is None:
                kinds = ", ".join(i.kind for i in server_kinds())
                result.error(
                    path,
                    f"Invalid value: the default server is for {kinds} replicas, not {job.get('kind')}; "
                    "remove the annotation",
                )
                continue
            self._validate_replica(info, job, key, path, result)

    def _validate_replica(self, info: KindInfo, job: Json, key: str, path: str, result: Result) -> None:
        specs = _replica_specs(job, info)
        rtype = key[len(ANNOTATION) + 1 :]
        found = _find_type(specs, rtype)
        if info.canonical_type(rtype) not in info.server_types:
            result.error(
                path,
                f'Invalid value: "{rtype}" runs the user\'s program; the default server is for '
                f"{' and '.join(info.server_types)} replicas",
            )
            return
        if found is None:
            known = ", ".join(sorted(specs)) or "none"
            result.error(
                path,
                f'Invalid value: this {info.kind} has no "{rtype}" replicas (it has {known}); add them or '
                "remove the annotation",
            )
            return
        container = _container(info, specs[found])
        if container is None:
            return  # the kind's own check reports the missing container
        index = _container_index(info, specs[found]["template"])
        container_path = f"spec.{info.replica_field}[{found}].template.spec.containers[{index}]"
        if runs_own_code(container):
            what = "args" if container.get("args") else "command"
            result.error(
                f"{container_path}.{what}",
                f"Forbidden: {key} runs the default server in this container, which sets its own {what}; "
                f"remove the {what} to run the default server, or remove the annotation to run your own",
            )
            return
        if _total_replicas(specs) < 2:
            result.error(
                path,
                f"Invalid value: a {info.kind} of one replica gets no TF_CONFIG, so a server has no cluster "
                "to serve; add the replicas that use it",
            )
        clean = _mapping(_mapping(job.get("spec")).get("runPolicy")).get("cleanPodPolicy")
        if clean in (None, "None"):
            result.warnings.append(
                f"{path}: a default server never exits by itself, and with spec.runPolicy.cleanPodPolicy "
                "None its pods keep running after the job finishes; set cleanPodPolicy: Running to delete "
                "them then"
            )
        leaders = [t for t in specs if info.canonical_type(t) in info.master_types]
        if info.canonical_type(found) == info.worker_type and not leaders:
            leader = _either(info.master_types)
            result.error(
                path,
                f"Invalid value: without a {leader}, {info.worker_type.lower()} 0 decides when the job "
                f"succeeds, and a {info.worker_type.lower()} running only a server never finishes; add a "
                f"{info.master_types[0]} that runs your training program",
            )

    def children(self, job: Json, values: Mapping[str, str], state: JobState) -> Addons:
        info = _info(job)
        if info is None or not requested(info, values, _replica_specs(job, info)):
            return Addons()
        meta = job["metadata"]
        name = str(meta["name"])
        return Addons(
            (
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": child_name(name),
                        "namespace": str(meta.get("namespace") or "default"),
                        "labels": {LABEL_JOB_NAME: name, COMPONENT_LABEL: self.name},
                    },
                    "data": {PROGRAM: program_source()},
                },
            )
        )

    def explain_failure(self, job: Json, values: Mapping[str, str], failure: ReplicaFailure) -> str:
        info = _info(job)
        if info is None or failure.exit_code != NO_TENSORFLOW:
            return ""
        specs = _replica_specs(job, info)
        key = requested(info, values, specs).get(failure.rtype)
        container = _container(info, specs.get(failure.rtype)) if key else None
        if key is None or container is None or runs_own_code(container):
            return ""
        return (
            f"{failure.pod} ran the default TensorFlow server ({key}) in image "
            f'"{container.get("image")}", which has no TensorFlow (exit code {NO_TENSORFLOW}): use an image '
            f"with TensorFlow, or give the {failure.rtype} container a command of its own."
        )
