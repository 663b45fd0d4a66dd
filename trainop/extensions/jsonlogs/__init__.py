"""JSON logs from a job's Python processes: the ConfigMap child and what it changes in every pod.

A job asking for them (`trainop.dev/log-format: json`, see `extension`) gets one ConfigMap child holding
`sitecustomize.py` (this package's file, standard library only), mounted read-only into every container
and init container of every pod, its folder first on PYTHONPATH, and the identity each record carries
as environment variables. A job without the annotation is not touched (docs/json-logs.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from trainop.api.checks import Result, quote_all
from trainop.api.constants import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from trainop.api.kinds import ChildType
from trainop.envvalues import SettingError
from trainop.extensions.base import Addons, AnnotationDoc, Draft, Extension, JobState, ShippedFile
from trainop.extensions.faces import ChartValue, RunOption
from trainop.extensions.jsonlogs import extension as annotation
from trainop.job.context import JobContext
from trainop.job.mounts import Mounted
from trainop.jsontypes import Json

NAME: Final = "json-logs"
SITECUSTOMIZE: Final = ShippedFile(
    package=__package__,
    file="sitecustomize.py",
    suffix=annotation.CHILD_SUFFIX,
    volume_name="trainop-jsonlogs",
    mount_path="/opt/trainop/jsonlogs",
    component=NAME,
)
VOLUME: Final = SITECUSTOMIZE.volume_name
MOUNT_PATH: Final = SITECUSTOMIZE.mount_path
MODULE: Final = SITECUSTOMIZE.file
# `trainop run --log-format json|text`: the annotation, as if the file had said it.
LOG_FORMAT_FLAG: Final = "--log-format"


def sitecustomize_source() -> str:
    return SITECUSTOMIZE.source


def _field(name: str, path: str) -> Json:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def identity_env(job_name: str, replica_type: str, index: str | None) -> list[Json]:
    """What every record says about where it comes from. Type and index are the pod's label values."""
    out = [
        {"name": "TRAINOP_JOB_NAME", "value": job_name},
        _field("TRAINOP_NAMESPACE", "metadata.namespace"),
        _field("TRAINOP_POD_NAME", "metadata.name"),
        _field("TRAINOP_NODE_NAME", "spec.nodeName"),
        {"name": "TRAINOP_REPLICA_TYPE", "value": replica_type},
    ]
    if index is not None:
        out.append({"name": "TRAINOP_REPLICA_INDEX", "value": index})
    return out


def with_python_path(env: list[Json]) -> list[Json]:
    """`env` with MOUNT_PATH first on the container's own PYTHONPATH, which is kept.

    A plain value is prefixed where it is; one from `valueFrom` is referred to by a later definition
    (`$(PYTHONPATH)`, which kubelet expands from the earlier one)."""
    out = []
    found = False
    for var in env:
        if var.get("name") == "PYTHONPATH" and "valueFrom" not in var:
            value = str(var.get("value") or "")
            var = {**var, "value": f"{MOUNT_PATH}:{value}" if value else MOUNT_PATH}
            found = True
        out.append(var)
    if not found:
        declared = any(v.get("name") == "PYTHONPATH" for v in env)
        out.append({"name": "PYTHONPATH", "value": f"{MOUNT_PATH}:$(PYTHONPATH)" if declared else MOUNT_PATH})
    return out


def decorate_pod(pod: Json, job_name: str, replica_type: str, index: str | None) -> None:
    """Mount the module into every container of `pod` (a desired pod, changed in place)."""
    spec = pod["spec"]
    spec["volumes"] = [*(spec.get("volumes") or []), SITECUSTOMIZE.volume(job_name)]
    mount = SITECUSTOMIZE.mount()
    identity = identity_env(job_name, replica_type, index)
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            own = [
                v for v in container.get("env") or [] if v.get("name") not in {e["name"] for e in identity}
            ]
            container["env"] = with_python_path([*own, *identity])
            container["volumeMounts"] = [*(container.get("volumeMounts") or []), dict(mount)]


class JsonLogs(Extension):
    """`trainop.dev/log-format`, in the registry: defaulting and validation from `extension`, the
    ConfigMap child and the pods' mount and environment from this module."""

    name = NAME
    child_types = (ChildType("v1", "configmaps", "InPlace"),)
    shipped = (SITECUSTOMIZE,)
    docs = (
        AnnotationDoc(
            key=annotation.ANNOTATION,
            value="json, text",
            effect="json: one JSON object per log line from every Python process of the job (a ConfigMap "
            "child `<job>-jsonlogs` with a standard-library sitecustomize first on PYTHONPATH, identity "
            "in the environment; docs/json-logs.md); text: the programs' own output. Defaulted from the "
            "chart's logging.trainingProcesses.format",
            example=f"{annotation.ANNOTATION}: json",
        ),
    )

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env

    def _default_format(self) -> str:
        return (
            annotation.configured_default() if self._env is None else annotation.configured_default(self._env)
        )

    def check_settings(self, environ: Mapping[str, str]) -> None:
        try:
            annotation.configured_default(environ)
        except ValueError:
            raise SettingError(
                annotation.DEFAULT_ENV, quote_all(annotation.FORMATS), environ.get(annotation.DEFAULT_ENV)
            ) from None

    def owns(self, key: str) -> bool:
        return key == annotation.ANNOTATION

    # ---- faces -----------------------------------------------------------------------------------
    chart_values = (ChartValue("logging.trainingProcesses.format", annotation.DEFAULT_ENV),)

    def run_options(self) -> tuple[RunOption, ...]:
        return (
            RunOption(
                LOG_FORMAT_FLAG,
                f"json: every Python process of the job logs one JSON object per line, as the annotation "
                f"{annotation.ANNOTATION} does on a cluster (default: the file's annotation, else "
                f"${annotation.DEFAULT_ENV}, else text)",
                choices=annotation.FORMATS,
            ),
        )

    def submitted(self, job: Json, options: Mapping[str, Any]) -> Json:
        chosen = options.get(LOG_FORMAT_FLAG)
        return job if chosen is None else annotation.requested(job, str(chosen))

    def applies_without_annotations(self) -> bool:
        try:
            return self._default_format() == annotation.JSON
        except ValueError:
            return True  # so that validation reports the broken setting

    def default(self, draft: Draft, values: Mapping[str, str]) -> Draft:
        try:
            default_format = self._default_format()
        except ValueError:
            return draft
        if default_format != annotation.JSON or annotation.ANNOTATION in values:
            return draft
        # A non-string value of ours is not in `values`: validation refuses it, so leave it.
        return (
            draft
            if annotation.annotation(draft.job) is not None
            else draft.with_annotations({annotation.ANNOTATION: annotation.JSON})
        )

    def validate(self, draft: Draft, values: Mapping[str, str], result: Result) -> None:
        try:
            self._default_format()
        except ValueError as e:
            result.error(
                annotation.DEFAULT_ENV, f"{e} (the cluster's default log format: ask its administrator)"
            )
        annotation.validate(draft.job, result)

    def children(self, ctx: JobContext, values: Mapping[str, str], state: JobState) -> Addons:
        if values.get(annotation.ANNOTATION) != annotation.JSON:
            return Addons()
        return Addons((SITECUSTOMIZE.config_map(ctx),))

    def mounts(self, ctx: JobContext, values: Mapping[str, str]) -> tuple[Mounted, ...]:
        if values.get(annotation.ANNOTATION) != annotation.JSON:
            return ()
        return (SITECUSTOMIZE.mounted(ctx),)

    def decorate_pod(self, ctx: JobContext, values: Mapping[str, str], pod: Json) -> Json:
        if values.get(annotation.ANNOTATION) != annotation.JSON:
            return pod
        labels = pod["metadata"].get("labels") or {}
        out = {**pod, "spec": _copy_containers(pod["spec"])}
        decorate_pod(
            out,
            ctx.name,
            str(labels.get(LABEL_REPLICA_TYPE, "")),
            labels.get(LABEL_REPLICA_INDEX),
        )
        return out


def _copy_containers(spec: Json) -> Json:
    # decorate_pod changes the containers and the volume list in place: give it copies of those.
    out = dict(spec)
    for key in ("initContainers", "containers"):
        if isinstance(spec.get(key), list):
            out[key] = [dict(c) for c in spec[key]]
    return out
