"""The `trainop.dev/log-format` annotation: its values, validation and defaulting, as pure functions.

`json` turns on one JSON object per log line for every Python process of the job (docs/json-logs.md);
`text` (or no annotation) leaves the job exactly as Kubeflow would run it. The cluster's default comes
from TRAINOP_DEFAULT_LOG_FORMAT (the chart's `logging.trainingProcesses.format`), read by both servers:
defaulting writes `json` onto a job that has no annotation when the default is `json`, so the stored job
shows what will run; a default of `text` writes nothing, so jobs stay byte-identical to Kubeflow's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from trainop.api.checks import Result, quote_all
from trainop.jsontypes import Json

ANNOTATION: Final = "trainop.dev/log-format"
PATH: Final = f"metadata.annotations[{ANNOTATION}]"
JSON: Final = "json"
TEXT: Final = "text"
FORMATS: Final = (JSON, TEXT)
DEFAULT_ENV: Final = "TRAINOP_DEFAULT_LOG_FORMAT"
# The per-job ConfigMap child holding the sitecustomize: `<job>-<suffix>`.
CHILD_SUFFIX: Final = "jsonlogs"
DNS_LABEL_MAX: Final = 63


def configured_default(env: Mapping[str, str] = os.environ) -> str:
    """The cluster's default format; a value other than json or text is a configuration error."""
    value = env.get(DEFAULT_ENV) or TEXT
    if value not in FORMATS:
        raise ValueError(f"{DEFAULT_ENV}={value!r}: must be one of {quote_all(FORMATS)}")
    return value


def annotation(job: Json) -> Any:
    """The annotation's value as found (None when absent; validation reports a non-string)."""
    meta = job.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations.get(ANNOTATION) if isinstance(annotations, dict) else None


def child_name(job_name: str) -> str:
    return f"{job_name}-{CHILD_SUFFIX}"


def requested(job: Json, log_format: str) -> Json:
    """`job` with the format asked for on the command line (`trainop run --log-format`), which wins over
    the file's annotation exactly as if the file had said it."""
    meta = job.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    return {**job, "metadata": {**meta, "annotations": {**annotations, ANNOTATION: log_format}}}


def validate(job: Json, result: Result) -> None:
    value = annotation(job)
    if value is None:
        return
    if not isinstance(value, str):
        result.error(PATH, f"Invalid value: {value!r}: annotation values are strings")
        return
    if value not in FORMATS:
        result.error(
            PATH,
            f'Unsupported value: "{value}": supported values: {quote_all(FORMATS)} (json: one JSON object '
            "per log line from every Python process of the job; text: the programs' own output)",
        )
        return
    meta = job.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if value == JSON and isinstance(name, str) and len(child_name(name)) > DNS_LABEL_MAX:
        allowed = DNS_LABEL_MAX - len(CHILD_SUFFIX) - 1
        result.error(
            PATH,
            f'Invalid value: "json": the job\'s JSON-logs ConfigMap "{child_name(name)}" would be '
            f"{len(child_name(name))} characters, over the {DNS_LABEL_MAX}-character limit; use a job name "
            f"of at most {allowed} characters or remove the annotation",
        )
