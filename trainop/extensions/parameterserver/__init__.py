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
from trainop.api.kinds import ChildType
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
from trainop.extensions.parameterserver.tf_server import NO_TENSORFLOW
from trainop.frameworks.tensorflow import TFJOB

Json = dict[str, Any]

ANNOTATION: Final = f"{PREFIX}default-server"
TENSORFLOW: Final = "tensorflow"
SERVERS: Final = (TENSORFLOW,)
# The replica types that may run only a server: a PS always does; a Worker does in TF2
# parameter-server training. Chief, Master and Evaluator run the user's program.
SERVER_TYPES: Final = ("PS", "Worker")
DEFAULT_ENV: Final = "TRAINOP_DEFAULT_PARAMETER_SERVER"
SWITCH_VALUES: Final = ("true", "false")

PROGRAM: Final = "tf_server.py"
VOLUME: Final = "trainop-tf-server"
MOUNT_PATH: Final = "/opt/trainop/tf-server"
CHILD_SUFFIX: Final = "tf-server"
TERMINATION_LOG: Final = "/dev/termination-log"


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
    """Whether the cluster gives every TFJob PS without a command the default server."""
    value = (env.get(DEFAULT_ENV) or "false").strip().lower()
    if value not in SWITCH_VALUES:
        raise ValueError(f"{DEFAULT_ENV}={env.get(DEFAULT_ENV)!r}: must be true or false")
    return value == "true"


def key_for(rtype: str) -> str:
    return f"{ANNOTATION}.{rtype}"


def _mapping(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


def _replica_specs(job: Json) -> Json:
    return _mapping(_mapping(job.get("spec")).get(TFJOB.replica_field))


def _find_type(specs: Mapping[str, Any], rtype: str) -> str | None:
    """The job's own spelling of a replica type (TFJob accepts any case of its keys)."""
    return next((k for k in specs if k.lower() == rtype.lower()), None)


def _container_index(template: Any) -> int | None:
    containers = _mapping(_mapping(template).get("spec")).get("containers")
    if not isinstance(containers, list):
        return None
    return next(
        (
            i
            for i, c in enumerate(containers)
            if isinstance(c, dict) and c.get("name") == TFJOB.default_container
        ),
        None,
    )


def _container(replica: Any) -> Json | None:
    template = _mapping(_mapping(replica).get("template"))
    index = _container_index(template)
    return None if index is None else dict(template["spec"]["containers"][index])


def runs_own_code(container: Json) -> bool:
    """Whether the container sets a command or args other than the default server's."""
    return bool(container.get("args")) or (
        bool(container.get("command")) and container.get("command") != server_command(container)
    )


def with_server(template: Json, job_name: str) -> Json:
    """The replica's template running the default server: command, the ConfigMap volume and its mount
    written in; the very same object when they already are (copy-on-write otherwise)."""
    spec = template["spec"]
    index = _container_index(template)
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


def _with_cluster_default(job: Json) -> Json:
    """`job` with the annotation for its PS when the cluster default is on and the PS container sets
    neither command nor args; the very same object otherwise."""
    if job.get("kind") != TFJOB.kind:
        return job
    specs = _replica_specs(job)
    ps = _find_type(specs, "PS")
    container = _container(specs.get(ps)) if ps is not None else None
    if container is None or container.get("command") or container.get("args"):
        return job
    meta = _mapping(job.get("metadata"))
    annotations = meta.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        return job
    if any(k.lower() == key_for("PS").lower() for k in annotations or {}):
        return job
    return {**job, "metadata": {**meta, "annotations": {**(annotations or {}), key_for("PS"): TENSORFLOW}}}


def requested(values: Mapping[str, str], specs: Mapping[str, Any]) -> dict[str, str]:
    """{the job's replica-type key: annotation key} for every well-formed annotation naming one."""
    out = {}
    for key, value in values.items():
        rtype = key[len(ANNOTATION) + 1 :] if key.startswith(f"{ANNOTATION}.") else ""
        found = _find_type(specs, rtype) if rtype else None
        if value == TENSORFLOW and found is not None and TFJOB.canonical_type(found) in SERVER_TYPES:
            out[found] = key
    return out


def _total_replicas(specs: Mapping[str, Any]) -> int:
    total = 0
    for replica in specs.values():
        n = _mapping(replica).get("replicas", 1)
        total += n if isinstance(n, int) and not isinstance(n, bool) else 1
    return total


class DefaultServer(Extension):
    """`trainop.dev/default-server.<ReplicaType>`, in the registry."""

    name = "default-server"
    child_types = (ChildType("v1", "configmaps", "InPlace"),)
    docs = (
        AnnotationDoc(
            key=f"{ANNOTATION}.<ReplicaType>",
            value="tensorflow",
            effect="TFJob PS (or Worker, for TF2 parameter-server training): the replicas run a "
            "tf.distribute.Server for their TF_CONFIG task in their own image, from a ConfigMap child "
            "`<job>-tf-server`; the command, volume and mount are written into the template. Refused on a "
            "container with a command or args. Written for PS by the chart's "
            "tensorflow.defaultParameterServer (docs/parameter-server.md)",
            example=f"{ANNOTATION}.PS: tensorflow",
        ),
    )

    def __init__(self, env: Mapping[str, str] = os.environ) -> None:
        self._env = env

    def owns(self, key: str) -> bool:
        return key == ANNOTATION or key.startswith(f"{ANNOTATION}.")

    def applies_without_annotations(self) -> bool:
        try:
            return configured_default(self._env)
        except ValueError:
            return True  # so that validation reports the broken setting

    def default(self, job: Json, values: Mapping[str, str]) -> Json:
        try:
            on = configured_default(self._env)
        except ValueError:
            on = False
        if job.get("kind") != TFJOB.kind:
            return job
        if on:
            before = job
            job = _with_cluster_default(job)
            if job is not before:
                values = {**values, key_for("PS"): TENSORFLOW}
        specs = _replica_specs(job)
        new_specs = dict(specs)
        name = _mapping(job.get("metadata")).get("name")
        for rtype in requested(values, specs):
            replica = specs[rtype]
            container = _container(replica)
            if not isinstance(name, str) or container is None or runs_own_code(container):
                continue  # for validate to report
            template = replica["template"]
            new_template = with_server(template, name)
            if new_template is not template:
                new_specs[rtype] = {**replica, "template": new_template}
        if new_specs == specs:
            return job
        return {**job, "spec": {**job["spec"], TFJOB.replica_field: new_specs}}

    def validate(self, job: Json, values: Mapping[str, str], result: Result) -> None:
        try:
            configured_default(self._env)
        except ValueError as e:
            result.error(DEFAULT_ENV, f"{e} (the cluster's default parameter server: ask its administrator)")
        kind = job.get("kind")
        for key, value in sorted(values.items()):
            path = annotation_path(key)
            if key == ANNOTATION:
                result.error(
                    path,
                    f"Invalid value: name the replica type in the key, e.g. {key_for('PS')}: {TENSORFLOW}",
                )
                continue
            if value not in SERVERS:
                result.error(
                    path,
                    f'Unsupported value: "{value}": supported values: "{TENSORFLOW}" (the replicas run a '
                    "tf.distribute.Server in their own image)",
                )
                continue
            if kind != TFJOB.kind:
                result.error(
                    path,
                    f"Invalid value: the default server is for TFJob replicas, not {kind}; remove the "
                    "annotation",
                )
                continue
            self._validate_replica(job, key, path, result)

    def _validate_replica(self, job: Json, key: str, path: str, result: Result) -> None:
        specs = _replica_specs(job)
        rtype = key[len(ANNOTATION) + 1 :]
        found = _find_type(specs, rtype)
        field = f"spec.{TFJOB.replica_field}[{found}]"
        if TFJOB.canonical_type(rtype) not in SERVER_TYPES:
            result.error(
                path,
                f'Invalid value: "{rtype}" runs the user\'s program; the default server is for '
                f"{' and '.join(SERVER_TYPES)} replicas",
            )
            return
        if found is None:
            known = ", ".join(sorted(specs)) or "none"
            result.error(
                path,
                f'Invalid value: this TFJob has no "{rtype}" replicas (it has {known}); add them or remove '
                "the annotation",
            )
            return
        container = _container(specs[found])
        if container is None:
            return  # the TFJob check reports the missing tensorflow container
        index = _container_index(specs[found]["template"])
        container_path = f"{field}.template.spec.containers[{index}]"
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
                "Invalid value: a TFJob of one replica gets no TF_CONFIG, so a server has no cluster to "
                "serve; add the replicas that use it",
            )
        clean = _mapping(_mapping(job.get("spec")).get("runPolicy")).get("cleanPodPolicy")
        if clean in (None, "None"):
            result.warnings.append(
                f"{path}: a default server never exits by itself, and with spec.runPolicy.cleanPodPolicy "
                "None its pods keep running after the job finishes; set cleanPodPolicy: Running to delete "
                "them then"
            )
        canonical = TFJOB.canonical_type(found)
        leaders = [t for t in specs if TFJOB.canonical_type(t) in TFJOB.master_types]
        if canonical == "Worker" and not leaders:
            result.error(
                path,
                "Invalid value: without a Chief, worker 0 decides when the job succeeds, and a worker "
                "running only a server never finishes; add a Chief that runs your training program",
            )

    def children(self, job: Json, values: Mapping[str, str], state: JobState) -> Addons:
        if job.get("kind") != TFJOB.kind or not requested(values, _replica_specs(job)):
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
        if failure.exit_code != NO_TENSORFLOW:
            return ""
        specs = _replica_specs(job)
        key = requested(values, specs).get(failure.rtype)
        container = _container(specs.get(failure.rtype)) if key else None
        if key is None or container is None or runs_own_code(container):
            return ""
        return (
            f"{failure.pod} ran the default TensorFlow server ({key}) in image "
            f'"{container.get("image")}", which has no TensorFlow (exit code {NO_TENSORFLOW}): use an image '
            f"with TensorFlow, or give the {failure.rtype} container a command of its own."
        )
