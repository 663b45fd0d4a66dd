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
from typing import Any, Final

from trainop.api.checks import Result
from trainop.api.kinds import ChildType, KindInfo
from trainop.envvalues import SettingError
from trainop.extensions.base import (
    PREFIX,
    Addons,
    AnnotationDoc,
    Draft,
    Extension,
    JobState,
    ReplicaFailure,
    ShippedFile,
    annotation_path,
    as_object,
    owns_family,
    per_type_suffix,
)
from trainop.extensions.faces import ChartValue
from trainop.extensions.parameterserver.tf_server import NO_TENSORFLOW
from trainop.frameworks import KINDS
from trainop.job.context import JobContext
from trainop.job.mounts import Mounted
from trainop.jsontypes import Json

ANNOTATION: Final = f"{PREFIX}default-server"
# The one server trainop ships; the kinds whose KindInfo names it may run it.
TENSORFLOW: Final = "tensorflow"
SERVERS: Final = (TENSORFLOW,)
DEFAULT_ENV: Final = "TRAINOP_DEFAULT_PARAMETER_SERVER"
SWITCH_VALUES: Final = ("true", "false")

NAME: Final = "default-server"
TF_SERVER: Final = ShippedFile(
    package=__package__,
    file="tf_server.py",
    suffix="tf-server",
    volume_name="trainop-tf-server",
    mount_path="/opt/trainop/tf-server",
    component=NAME,
)
PROGRAM: Final = TF_SERVER.file
VOLUME: Final = TF_SERVER.volume_name
MOUNT_PATH: Final = TF_SERVER.mount_path
TERMINATION_LOG: Final = "/dev/termination-log"


def server_kinds() -> list[KindInfo]:
    return [info for info in KINDS.values() if info.default_server in SERVERS]


def program_source() -> str:
    return TF_SERVER.source


def server_command(container: Json) -> list[str]:
    """What a server container runs. `python3`: every TensorFlow image has it (`python` is not in all)."""
    log = container.get("terminationMessagePath") or TERMINATION_LOG
    return ["python3", TF_SERVER.path, "--termination-log", str(log)]


def configured_default(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the cluster gives every parameter server without a command the default server."""
    value = (env.get(DEFAULT_ENV) or "false").strip().lower()
    if value not in SWITCH_VALUES:
        raise ValueError(f"{DEFAULT_ENV}={env.get(DEFAULT_ENV)!r}: must be true or false")
    return value == "true"


def key_for(rtype: str) -> str:
    return f"{ANNOTATION}.{rtype}"


def _serving(info: KindInfo | None) -> KindInfo | None:
    """The kind's facts when it may run the default server."""
    return info if info is not None and info.default_server in SERVERS else None


def _find_type(specs: Mapping[str, Any], rtype: str) -> str | None:
    """The job's own spelling of a replica type (replica-map keys match in any case)."""
    return next((k for k in specs if k.lower() == rtype.lower()), None)


def _container_index(info: KindInfo, template: Any) -> int | None:
    containers = as_object(as_object(template).get("spec")).get("containers")
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
    template = as_object(as_object(replica).get("template"))
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
    volume = TF_SERVER.volume(job_name)
    mount = TF_SERVER.mount()
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


def _with_cluster_default(draft: Draft, info: KindInfo) -> Draft:
    """The draft with the annotation for its parameter servers when their container sets neither
    command nor args and no annotation names them."""
    if info.parameter_server_type is None:
        return draft
    specs = draft.replica_specs
    ps = draft.find_type(info.parameter_server_type)
    container = _container(info, specs.get(ps)) if ps is not None else None
    if container is None or container.get("command") or container.get("args"):
        return draft
    key = key_for(info.parameter_server_type)
    annotations = as_object(as_object(draft.job.get("metadata")).get("annotations"))
    if any(k.lower() == key.lower() for k in annotations):
        return draft
    return draft.with_annotations({key: info.default_server})


def requested(info: KindInfo, values: Mapping[str, str], specs: Mapping[str, Any]) -> dict[str, str]:
    """{the job's replica-type key: annotation key} for every well-formed annotation naming one."""
    out = {}
    for key, value in values.items():
        rtype = per_type_suffix(key, ANNOTATION) or ""
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
        n = as_object(replica).get("replicas", 1)
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

    name = NAME
    child_types = (ChildType("v1", "configmaps", "InPlace"),)
    shipped = (TF_SERVER,)
    docs = (_doc(),)

    def __init__(self, env: Mapping[str, str] = os.environ) -> None:
        self._env = env

    def check_settings(self, environ: Mapping[str, str]) -> None:
        try:
            configured_default(environ)
        except ValueError:
            raise SettingError(DEFAULT_ENV, "true or false", environ.get(DEFAULT_ENV)) from None

    def owns(self, key: str) -> bool:
        return owns_family(key, ANNOTATION)

    # ---- faces -----------------------------------------------------------------------------------
    chart_values = (ChartValue("tensorflow.defaultParameterServer", DEFAULT_ENV),)

    def applies_without_annotations(self) -> bool:
        try:
            return configured_default(self._env)
        except ValueError:
            return True  # so that validation reports the broken setting

    def default(self, draft: Draft, values: Mapping[str, str]) -> Draft:
        info = _serving(draft.info)
        if info is None:
            return draft
        try:
            on = configured_default(self._env)
        except ValueError:
            on = False
        if on:
            draft = _with_cluster_default(draft, info)
            values = {**values, **draft.written_by(self.owns)}
        specs = draft.replica_specs
        wanted = requested(info, values, specs)
        name = draft.name

        def serve(rtype: str, template: Json) -> Json:
            container = _container(info, specs[rtype]) if rtype in wanted else None
            if name is None or container is None or runs_own_code(container):
                return template  # for validate to report
            return with_server(info, template, name)

        return draft.with_templates(serve)

    def validate(self, draft: Draft, values: Mapping[str, str], result: Result) -> None:
        try:
            configured_default(self._env)
        except ValueError as e:
            result.error(DEFAULT_ENV, f"{e} (the cluster's default parameter server: ask its administrator)")
        info = _serving(draft.info)
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
                    f"Invalid value: the default server is for {kinds} replicas, not "
                    f"{draft.job.get('kind')}; remove the annotation",
                )
                continue
            self._validate_replica(info, draft, key, path, result)

    def _validate_replica(self, info: KindInfo, draft: Draft, key: str, path: str, result: Result) -> None:
        specs = draft.replica_specs
        rtype = per_type_suffix(key, ANNOTATION) or ""
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
        clean = as_object(as_object(draft.job.get("spec")).get("runPolicy")).get("cleanPodPolicy")
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

    def children(self, ctx: JobContext, values: Mapping[str, str], state: JobState) -> Addons:
        info = _serving(ctx.info)
        if info is None or not requested(info, values, ctx.replica_specs):
            return Addons()
        return Addons((TF_SERVER.config_map(ctx),))

    def mounts(self, ctx: JobContext, values: Mapping[str, str]) -> tuple[Mounted, ...]:
        # Defaulting wrote the volume into the templates of the replica types that run the server.
        info = _serving(ctx.info)
        served = requested(info, values, ctx.replica_specs) if info is not None else {}
        if not served:
            return ()
        return (TF_SERVER.mounted(ctx, frozenset(served)),)

    def explain_failure(self, ctx: JobContext, values: Mapping[str, str], failure: ReplicaFailure) -> str:
        info = _serving(ctx.info)
        if info is None or failure.exit_code != NO_TENSORFLOW:
            return ""
        # Keyed by canonical type, as the failure names it.
        specs = ctx.replica_specs
        key = requested(info, values, specs).get(failure.rtype)
        container = _container(info, specs.get(failure.rtype)) if key else None
        if key is None or container is None or runs_own_code(container):
            return ""
        return (
            f"{failure.pod} ran the default TensorFlow server ({key}) in image "
            f'"{container.get("image")}", which has no TensorFlow (exit code {NO_TENSORFLOW}): use an image '
            f"with TensorFlow, or give the {failure.rtype} container a command of its own."
        )
