"""TensorBoard for a job: a Deployment and Service beside it, over the log directory its replicas write.

`trainop.dev/tensorboard: <log directory>` names where the job's event files go:

* `s3://<bucket>[/<prefix>]`, with `trainop.dev/tensorboard.s3-endpoint: <url>` for an S3-compatible
  store such as MinIO and `trainop.dev/tensorboard.s3-secret: <Secret name>` holding
  AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (both optional);
* `gs://<bucket>[/<prefix>]` (credentials from the pods' own identity);
* `pvc://<claim>[/<sub-path>]`: a PersistentVolumeClaim, mounted into every training container and,
  read-only, into TensorBoard.

Defaulting writes into every replica type's template: the environment variable TENSORBOARD_LOG_DIR, one
sub-directory per pod (`<dir>/<replica type>-<index>`, from the replica-index label through
TRAINOP_REPLICA_INDEX), so replicas never overwrite each other's files; for S3 the endpoint and
Secret as environment; for a PVC its volume and mounts. It also writes
`trainop.dev/tensorboard.keep-after` (the cluster default when the job names none).

The sync hook then returns a Deployment, a Service and a NetworkPolicy named `<job>-tensorboard` (port
80, served under the path prefix `/tensorboard/<namespace>/<job>/` so one Ingress can route every job's),
from the job's creation until `keep-after` (at most 30 days) past its completion. The Deployment follows
the job's suspension as its pods do: none while a queue holds the job. The NetworkPolicy admits only the
cluster's `TRAINOP_TENSORBOARD_INGRESS_FROM` peers (the Ingress controller; none by default).
docs/tensorboard.md has the objects in full.

`trainop run --tensorboard` gives a job without the annotation a directory of this machine instead
(`with_local_log_dir`): the same variable and per-pod sub-directories, written where defaulting writes
them, so the training code cannot tell a local run from a cluster's.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any, Final

from trainop.api.checks import Result
from trainop.api.constants import LABEL_JOB_NAME, LABEL_REPLICA_INDEX
from trainop.api.kinds import ChildType
from trainop.envvalues import Reader, SettingError
from trainop.extensions.base import (
    COMPONENT_LABEL,
    PREFIX,
    Addons,
    AnnotationDoc,
    Draft,
    Extension,
    JobState,
    annotation_path,
)
from trainop.extensions.faces import ChartValue, JobLink, LocalRefusal, LocalServer, LocalSetup, RunOption
from trainop.job.context import JobContext
from trainop.jsontypes import Json

ANNOTATION: Final = f"{PREFIX}tensorboard"
ENDPOINT: Final = f"{ANNOTATION}.s3-endpoint"
SECRET: Final = f"{ANNOTATION}.s3-secret"
KEEP_AFTER: Final = f"{ANNOTATION}.keep-after"
KEYS: Final = (ANNOTATION, ENDPOINT, SECRET, KEEP_AFTER)

IMAGE_ENV: Final = "TRAINOP_TENSORBOARD_IMAGE"
KEEP_AFTER_ENV: Final = "TRAINOP_TENSORBOARD_KEEP_AFTER"
INGRESS_FROM_ENV: Final = "TRAINOP_TENSORBOARD_INGRESS_FROM"
DEFAULT_IMAGE: Final = "trainop-tensorboard:0.1.0"
DEFAULT_KEEP_AFTER: Final = "1h"
# A board is a Deployment holding a node's CPU and memory outside any queue's quota once its job is done:
# long enough to read a finished run's curves after a holiday, short enough that forgotten boards go.
MAX_KEEP_AFTER: Final = timedelta(days=30)
MAX_KEEP_AFTER_TEXT: Final = "30d"

LOG_DIR_VAR: Final = "TENSORBOARD_LOG_DIR"
INDEX_VAR: Final = "TRAINOP_REPLICA_INDEX"
VOLUME: Final = "trainop-tensorboard"
MOUNT: Final = "/var/run/trainop/tensorboard"
PORT: Final = 6006
SUFFIX: Final = "-tensorboard"
DNS_LABEL_MAX: Final = 63

# `trainop run --tensorboard` (local_log_dir, local_server).
SERVE_FLAG: Final = "--tensorboard"
RECORD_KEY: Final = "tensorboard"  # run.json's {"tensorboard": {"url": ...}}, which the UI links to
LOCAL_LOG_DIR: Final = "tensorboard"
LOCAL_LOG_FILE: Final = "tensorboard.log"
MISSING: Final = "--tensorboard needs TensorBoard in this Python ({python}): pip install tensorboard"
# TensorBoard as the image runs it, without TensorFlow even where this Python has it: TensorFlow's file
# systems have no s3:// (TensorBoard's own, through boto3, do). The module tensorboard.compat.notf is
# TensorBoard's switch for that: where it imports, TensorBoard uses its stub instead of TensorFlow.
WITHOUT_TENSORFLOW: Final = (
    "import sys, types; "
    "sys.modules['tensorboard.compat.notf'] = types.ModuleType('tensorboard.compat.notf'); "
    "from tensorboard.main import run_main; run_main()"
)
# TensorBoard imports its plugins before it listens: seconds, more on a loaded machine.
READY_TIMEOUT: Final = 120.0

_DURATION: Final = re.compile(r"^(?P<n>[0-9]{1,6})(?P<unit>[smhd])$")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_BUCKET: Final = re.compile(r"^[a-z0-9][a-z0-9.\-_]{1,221}[a-z0-9]$")
_DNS_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUB_PATH: Final = re.compile(r"^[A-Za-z0-9._\-]+(/[A-Za-z0-9._\-]+)*$")
_LABEL_NAME: Final = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE: Final = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class LogDir:
    # "s3", "gs" or "pvc"; "local" (an absolute path of this machine) only from `trainop run`, never
    # from an annotation
    scheme: str
    location: str  # bucket[/prefix] for s3 and gs, claim for pvc, the directory for local
    sub_path: str = ""  # pvc only

    @property
    def claim(self) -> str:
        return self.location

    def for_training(self) -> str:
        """Where the training containers write (before the per-pod sub-directory)."""
        if self.scheme == "pvc":
            return MOUNT
        if self.scheme == "local":
            return self.location
        return f"{self.scheme}://{self.location}"


def parse_log_dir(value: str) -> LogDir | str:
    """The log directory a value names, or what is wrong with it."""
    scheme, sep, rest = value.partition("://")
    usage = "use s3://<bucket>[/<prefix>], gs://<bucket>[/<prefix>] or pvc://<claim>[/<sub-path>]"
    if not sep or scheme not in ("s3", "gs", "pvc"):
        return f'Unsupported value: "{value}": {usage}'
    head, _, tail = rest.strip("/").partition("/")
    if tail and (not _SUB_PATH.fullmatch(tail) or ".." in tail.split("/")):
        return f'Invalid value: "{value}": "{tail}" must be a relative path without ".." elements'
    if scheme == "pvc":
        if not _DNS_NAME.fullmatch(head) or len(head) > 253:
            return f'Invalid value: "{value}": "{head}" is not a PersistentVolumeClaim name; {usage}'
        return LogDir("pvc", head, tail)
    if not _BUCKET.fullmatch(head):
        return f'Invalid value: "{value}": "{head}" is not a bucket name; {usage}'
    return LogDir(scheme, f"{head}/{tail}" if tail else head)


def parse_duration(value: str) -> timedelta | None:
    match = _DURATION.fullmatch(value)
    if match is None:
        return None
    return timedelta(seconds=int(match["n"]) * _UNITS[match["unit"]])


def keep_after_problem(value: str) -> str | None:
    """What is wrong with a keep-after duration (malformed, or beyond MAX_KEEP_AFTER), or None."""
    keep = parse_duration(value)
    if keep is None:
        return 'a whole number with s, m, h or d, e.g. "24h" or "0s"'
    if keep > MAX_KEEP_AFTER:
        hours = int(MAX_KEEP_AFTER.total_seconds()) // 3600
        return (
            f"at most {MAX_KEEP_AFTER_TEXT} ({hours}h): TensorBoard holds a pod for that long after the job; "
            'give a shorter one, e.g. "7d"'
        )
    return None


# ---- who may reach a board -----------------------------------------------------------------------------
def _peer_problem(peer: Any) -> str | None:
    """What is wrong with one NetworkPolicyPeer (networking.k8s.io/v1), or None."""
    if not isinstance(peer, dict) or not peer:
        return "must be an object with namespaceSelector, podSelector or ipBlock"
    unknown = sorted(set(peer) - {"namespaceSelector", "podSelector", "ipBlock"})
    if unknown:
        return f"unknown field {unknown[0]!r} (namespaceSelector, podSelector or ipBlock)"
    if "ipBlock" in peer:
        if len(peer) > 1:
            return "ipBlock cannot be combined with a selector"
        return _ip_block_problem(peer["ipBlock"])
    for name in ("namespaceSelector", "podSelector"):
        if name in peer and (problem := _selector_problem(peer[name])) is not None:
            return f"{name}: {problem}"
    return None


def _ip_block_problem(block: Any) -> str | None:
    if not isinstance(block, dict) or set(block) - {"cidr", "except"} or "cidr" not in block:
        return "ipBlock: must be {cidr: <CIDR>[, except: [<CIDR>, ...]]}"
    excepted = block.get("except", [])
    if not isinstance(excepted, list):
        return "ipBlock.except: must be a list of CIDRs"
    for cidr in (block["cidr"], *excepted):
        try:
            ipaddress.ip_network(cidr if isinstance(cidr, str) else "", strict=False)
        except ValueError:
            return f"ipBlock: {cidr!r} is not a CIDR such as 10.0.0.0/16"
    return None


def _label_key_problem(key: Any) -> str | None:
    if not isinstance(key, str):
        return f"label key {key!r} must be a string"
    prefix, _, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_NAME.fullmatch(prefix))) or not _LABEL_NAME.fullmatch(name):
        return f"{key!r} is not a label key"
    return None


def _selector_problem(selector: Any) -> str | None:
    """What is wrong with one LabelSelector, or None ({} selects everything, as in Kubernetes)."""
    if not isinstance(selector, dict) or set(selector) - {"matchLabels", "matchExpressions"}:
        return "must be {matchLabels: {...}, matchExpressions: [...]}"
    labels = selector.get("matchLabels", {})
    if not isinstance(labels, dict):
        return "matchLabels: must be an object of label keys and values"
    for key, value in labels.items():
        if (problem := _label_key_problem(key)) is not None:
            return f"matchLabels: {problem}"
        if not isinstance(value, str) or not _LABEL_VALUE.fullmatch(value):
            return f"matchLabels[{key}]: {value!r} is not a label value"
    expressions = selector.get("matchExpressions", [])
    if not isinstance(expressions, list):
        return "matchExpressions: must be a list"
    for i, expression in enumerate(expressions):
        where = f"matchExpressions[{i}]"
        if not isinstance(expression, dict) or set(expression) - {"key", "operator", "values"}:
            return f"{where}: must be {{key, operator, values}}"
        if (problem := _label_key_problem(expression.get("key"))) is not None:
            return f"{where}: {problem}"
        operator, values = expression.get("operator"), expression.get("values")
        if operator not in _OPERATORS:
            return f"{where}.operator: {operator!r} is not one of {', '.join(_OPERATORS)}"
        strings = isinstance(values, list) and all(isinstance(v, str) for v in values)
        if values is not None and not strings:
            return f"{where}.values: must be a list of strings"
        if operator in ("In", "NotIn") and not values:
            return f"{where}.values: {operator} needs at least one value"
        if operator in ("Exists", "DoesNotExist") and values:
            return f"{where}.values: {operator} takes no values"
    return None


@dataclass(frozen=True)
class IngressFrom(Reader[tuple[Json, ...]]):
    """The peers every board admits (the Ingress controller's pods): a JSON list of NetworkPolicyPeers.
    Unset or `[]`: none, so a board is reached only through `kubectl port-forward`."""

    @property
    def expects(self) -> str:
        return (
            "a JSON list of NetworkPolicyPeers, e.g. "
            '[{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]'
        )

    def parse(self, value: str, raw: str) -> tuple[Json, ...]:
        try:
            peers = json.loads(value)
        except ValueError:
            self.refuse(raw)
        if not isinstance(peers, list):
            self.refuse(raw)
        for i, peer in enumerate(peers):
            problem = _peer_problem(peer)
            if problem is not None:
                raise SettingError(self.name, f"{self.expects}; [{i}]: {problem}", raw)
        return tuple(peers)


INGRESS_FROM: Final = IngressFrom(INGRESS_FROM_ENV, ())


@cache
def _ingress_from(raw: str) -> tuple[Json, ...]:
    # The servers refused a malformed value at start-up (check_settings); read once per distinct value.
    return INGRESS_FROM.read({INGRESS_FROM_ENV: raw})


def _s3_env(log_dir: LogDir, values: Mapping[str, str]) -> list[Json]:
    endpoint = values.get(ENDPOINT)
    if log_dir.scheme != "s3" or not endpoint:
        return []
    # boto3 reads AWS_ENDPOINT_URL, TensorFlow's and TensorBoard's S3 file systems S3_ENDPOINT.
    return [{"name": "AWS_ENDPOINT_URL", "value": endpoint}, {"name": "S3_ENDPOINT", "value": endpoint}]


def _replica_env(log_dir: LogDir, rtype: str, values: Mapping[str, str]) -> list[Json]:
    index = {"fieldRef": {"fieldPath": f"metadata.labels['{LABEL_REPLICA_INDEX}']"}}
    return [
        {"name": INDEX_VAR, "valueFrom": index},
        {"name": LOG_DIR_VAR, "value": f"{log_dir.for_training()}/{rtype.lower()}-$({INDEX_VAR})"},
        *_s3_env(log_dir, values),
    ]


class TensorBoard(Extension):
    name = "tensorboard"
    child_types = (
        ChildType("apps/v1", "deployments", "InPlace"),
        ChildType("networking.k8s.io/v1", "networkpolicies", "InPlace"),
    )
    docs = (
        AnnotationDoc(
            key=ANNOTATION,
            value="s3://<bucket>[/<prefix>], gs://<bucket>[/<prefix>], pvc://<claim>[/<sub-path>]",
            effect="a TensorBoard Deployment, Service and NetworkPolicy `<job>-tensorboard` over that "
            "directory (no Deployment while the job is suspended; ingress only from the chart's "
            "`tensorboard.ingressFrom`); every training container gets TENSORBOARD_LOG_DIR, one "
            "sub-directory per pod",
            example=f"{ANNOTATION}: s3://experiments/run-7",
        ),
        AnnotationDoc(
            key=ENDPOINT,
            value="an http(s) URL",
            effect="the S3-compatible endpoint (MinIO) for TensorBoard and the training containers",
            example=f"{ENDPOINT}: http://minio.storage:9000",
        ),
        AnnotationDoc(
            key=SECRET,
            value="a Secret name in the job's namespace",
            effect="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from that Secret, in TensorBoard and the "
            "training containers",
            example=f"{SECRET}: minio-credentials",
        ),
        AnnotationDoc(
            key=KEEP_AFTER,
            value="<n>s, <n>m, <n>h or <n>d, at most 30d",
            effect="how long TensorBoard outlives the finished job; defaulted from the cluster setting",
            example=f"{KEEP_AFTER}: 24h",
        ),
    )

    def __init__(self, env: Mapping[str, str] = os.environ) -> None:
        self._env = env

    def check_settings(self, environ: Mapping[str, str]) -> None:
        keep = environ.get(KEEP_AFTER_ENV) or DEFAULT_KEEP_AFTER
        problem = keep_after_problem(keep)
        if problem is not None:
            raise SettingError(KEEP_AFTER_ENV, problem, keep)
        INGRESS_FROM.read(environ)

    def owns(self, key: str) -> bool:
        return key in KEYS

    def image(self) -> str:
        return self._env.get(IMAGE_ENV) or DEFAULT_IMAGE

    def default_keep_after(self) -> str:
        return self._env.get(KEEP_AFTER_ENV) or DEFAULT_KEEP_AFTER

    def ingress_from(self) -> tuple[Json, ...]:
        return _ingress_from(self._env.get(INGRESS_FROM_ENV, ""))

    # ---- faces -----------------------------------------------------------------------------------
    chart_values = (
        ChartValue("tensorboard.image", IMAGE_ENV),
        ChartValue("tensorboard.keepAfter", KEEP_AFTER_ENV),
        ChartValue("tensorboard.ingressFrom", INGRESS_FROM_ENV),
    )
    # On a cluster the link goes where the UI's `--tensorboard-url` template says; for a local run, to
    # the TensorBoard `trainop run --tensorboard` started and recorded.
    links = (JobLink("TensorBoard", RECORD_KEY, "tensorboard_url"),)
    summary_annotations = (ANNOTATION,)

    def linked(self, link: JobLink, values: Mapping[str, str]) -> bool:
        return ANNOTATION in values

    def local_notices(self, values: Mapping[str, str]) -> tuple[str, ...]:
        if ANNOTATION not in values:
            return ()
        # The sync returns the same children here as on a cluster; the local apiserver stores them, and
        # nothing runs a Deployment or enforces a NetworkPolicy on this machine.
        return (
            f"{ANNOTATION}: the TensorBoard Deployment and NetworkPolicy are cluster objects, stored but "
            f"not run here; {SERVE_FLAG} serves TensorBoard on 127.0.0.1, which only this machine reaches",
        )

    def run_options(self) -> tuple[RunOption, ...]:
        return (
            RunOption(
                SERVE_FLAG,
                "serve TensorBoard on a free 127.0.0.1 port over the job's log directory (a folder of the "
                f"run, given to every pod as {LOG_DIR_VAR}, unless the job names an s3:// or gs:// one) "
                "and print its URL; it keeps serving after the job ends, until Ctrl-C",
            ),
        )

    def local_setup(self, job: Json, options: Mapping[str, Any], workdir: Path) -> LocalSetup:
        if not options.get(SERVE_FLAG):
            return LocalSetup(job)
        job, directory, env = local_log_dir(job, workdir)
        return LocalSetup(job, (local_server(directory, env),))

    # ---- admission -------------------------------------------------------------------------------
    def default(self, draft: Draft, values: Mapping[str, str]) -> Draft:
        raw = values.get(ANNOTATION)
        log_dir = parse_log_dir(raw) if raw is not None else None
        if not isinstance(log_dir, LogDir) or draft.info is None:
            return draft
        draft = _with_replica_env(draft, log_dir, values)
        return (
            draft if KEEP_AFTER in values else draft.with_annotations({KEEP_AFTER: self.default_keep_after()})
        )

    def validate(self, draft: Draft, values: Mapping[str, str], result: Result) -> None:
        raw = values.get(ANNOTATION)
        if raw is None:
            for key in sorted(values):
                result.error(annotation_path(key), f"Invalid value: only meaningful with {ANNOTATION}")
            return
        log_dir = parse_log_dir(raw)
        if isinstance(log_dir, str):
            result.error(annotation_path(ANNOTATION), log_dir)
            return
        endpoint = values.get(ENDPOINT)
        if endpoint is not None and log_dir.scheme != "s3":
            only = f"Invalid value: only meaningful with s3:// in {ANNOTATION}"
            result.error(annotation_path(ENDPOINT), only)
        elif endpoint is not None and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", endpoint):
            why = "must be an http:// or https:// URL"
            result.error(annotation_path(ENDPOINT), f'Invalid value: "{endpoint}": {why}')
        secret = values.get(SECRET)
        if secret is not None and (log_dir.scheme != "s3" or not _DNS_NAME.fullmatch(secret)):
            why = (
                "must name a Secret (a DNS subdomain)"
                if log_dir.scheme == "s3"
                else "only meaningful with s3://"
            )
            result.error(annotation_path(SECRET), f'Invalid value: "{secret}": {why}')
        keep = values.get(KEEP_AFTER)
        problem = keep_after_problem(keep) if keep is not None else None
        if problem is not None:
            result.error(annotation_path(KEEP_AFTER), f'Invalid value: "{keep}": {problem}')
        name = draft.name or ""
        if len(name) + len(SUFFIX) > DNS_LABEL_MAX:
            result.error(
                "metadata.name",
                f'Invalid value: "{name}": with {ANNOTATION} the name may have at most '
                f"{DNS_LABEL_MAX - len(SUFFIX)} characters (its TensorBoard Service is <name>{SUFFIX})",
            )
        _check_training_env(draft, log_dir, values, result)

    # ---- children --------------------------------------------------------------------------------
    def children(self, ctx: JobContext, values: Mapping[str, str], state: JobState) -> Addons:
        raw = values.get(ANNOTATION)
        log_dir = parse_log_dir(raw) if raw is not None else None
        if not isinstance(log_dir, LogDir):
            return Addons()
        keep = parse_duration(values.get(KEEP_AFTER) or self.default_keep_after()) or timedelta(0)
        resync: float | None = None
        if state.finished_at is not None:
            left = (state.finished_at + keep - state.now).total_seconds()
            if left <= 0:
                return Addons()
            resync = round(left, 3)
        name, namespace = ctx.name, ctx.namespace
        kept = (_service(name, namespace), network_policy(name, namespace, self.ingress_from()))
        # A suspended job has no pods (a queue holds it outside its quota): neither has its board. The
        # Service and the policy stay, so links keep their address and the board never runs unguarded.
        # A finished job is no longer held by its suspension: its board follows keep-after.
        if ctx.suspended and state.finished_at is None:
            return Addons(kept)
        return Addons((self._deployment(name, namespace, log_dir, values), *kept), resync)

    def _deployment(self, job: str, namespace: str, log_dir: LogDir, values: Mapping[str, str]) -> Json:
        labels = _labels(job)
        container: Json = {
            "name": "tensorboard",
            "image": self.image(),
            "args": [
                f"--logdir={_served_dir(log_dir)}",
                "--bind_all",
                f"--port={PORT}",
                f"--path_prefix={path_prefix(namespace, job)}",
            ],
            "ports": [{"name": "http", "containerPort": PORT}],
            "readinessProbe": {"httpGet": {"path": f"{path_prefix(namespace, job)}/", "port": "http"}},
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}},
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "capabilities": {"drop": ["ALL"]},
            },
        }
        env = _s3_env(log_dir, values)
        if env:
            container["env"] = env
        if log_dir.scheme == "s3" and values.get(SECRET):
            container["envFrom"] = [{"secretRef": {"name": values[SECRET]}}]
        pod: Json = {"containers": [container], "automountServiceAccountToken": False}
        if log_dir.scheme == "pvc":
            container["volumeMounts"] = [_mount(log_dir, read_only=True)]
            pod["volumes"] = [_volume(log_dir, read_only=True)]
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": f"{job}{SUFFIX}", "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        }


def with_local_log_dir(job: Json, directory: str) -> Json:
    """`job` (admitted, without the annotation) writing its event files under `directory`, one
    sub-directory per pod, exactly as defaulting writes a cluster directory into it."""
    return _with_replica_env(Draft(job), LogDir("local", directory), {}).job


def served_log_dir(values: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """The directory TensorBoard reads for a job with these annotations and the environment it needs to
    read it (the S3 endpoint), or None when there is no directory a process outside the cluster could
    read (no annotation, or a PersistentVolumeClaim)."""
    raw = values.get(ANNOTATION)
    log_dir = parse_log_dir(raw) if raw is not None else None
    if not isinstance(log_dir, LogDir) or log_dir.scheme == "pvc":
        return None
    env = {str(e["name"]): str(e["value"]) for e in _s3_env(log_dir, values)}
    return log_dir.for_training(), env


# ---- `trainop run --tensorboard` ---------------------------------------------------------------------
# TensorBoard over the run's log directory, on a free loopback port (trainop.local.services runs it). A job
# without the annotation writes into `tensorboard/` of the run's folder (one sub-directory per pod, as on
# a cluster: `with_local_log_dir`); a job with an `s3://` or `gs://` annotation is served from there, with
# the annotation's S3 endpoint. TensorBoard is this machine's process, outside the replicas' loopback-only
# namespace, so a browser here reaches it; it listens on 127.0.0.1 only. docs/tensorboard.md says how long
# it serves.
def installed() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


def local_log_dir(job: Json, workdir: Path) -> tuple[Json, str, dict[str, str]]:
    """(the admitted job as it runs here, the directory TensorBoard serves, TensorBoard's extra
    environment), or a LocalRefusal saying why this run cannot have it."""
    if not installed():
        raise LocalRefusal(MISSING.format(python=sys.executable))
    annotations: Mapping[str, str] = (job.get("metadata") or {}).get("annotations") or {}
    if ANNOTATION not in annotations:
        directory = str((workdir / LOCAL_LOG_DIR).resolve())
        return with_local_log_dir(job, directory), directory, {}
    served = served_log_dir(annotations)
    if served is None:
        raise LocalRefusal(
            f"metadata.annotations[{ANNOTATION}]: --tensorboard serves s3:// and gs:// "
            "directories or, without the annotation, one in the run's folder; a pvc:// one is only "
            "readable on the cluster: remove the annotation for a local run"
        )
    return job, served[0], served[1]


def local_server(directory: str, env: Mapping[str, str]) -> LocalServer:
    argv = (
        *(sys.executable, "-c", WITHOUT_TENSORFLOW),
        *(f"--logdir={directory}", "--host=127.0.0.1", "--port={port}", "--reload_interval=2"),
    )
    return LocalServer(
        name="TensorBoard",
        record_key=RECORD_KEY,
        argv=argv,
        ready_path="data/environment",
        directory=directory,
        env=dict(env),
        log_file=LOCAL_LOG_FILE,
        ready_timeout=READY_TIMEOUT,
    )


def path_prefix(namespace: str, job: str) -> str:
    return f"/tensorboard/{namespace}/{job}"


def _service(job: str, namespace: str) -> Json:
    labels = _labels(job)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{job}{SUFFIX}", "namespace": namespace, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    }


def network_policy(job: str, namespace: str, peers: tuple[Json, ...]) -> Json:
    """Ingress to the board's pods only from `peers`, on TensorBoard's port; with no peers, none at all
    (kubectl port-forward and the kubelet's probes still reach it: NetworkPolicies do not filter them)."""
    labels = _labels(job)
    spec: Json = {"podSelector": {"matchLabels": labels}, "policyTypes": ["Ingress"]}
    if peers:
        spec["ingress"] = [{"from": list(peers), "ports": [{"protocol": "TCP", "port": PORT}]}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{job}{SUFFIX}", "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def _labels(job: str) -> dict[str, str]:
    # Not the job-name label alone: the job's own Services select their pods by it.
    return {LABEL_JOB_NAME: job, COMPONENT_LABEL: "tensorboard"}


def _served_dir(log_dir: LogDir) -> str:
    return MOUNT if log_dir.scheme == "pvc" else log_dir.for_training()


def _volume(log_dir: LogDir, read_only: bool) -> Json:
    claim: Json = {"claimName": log_dir.claim}
    if read_only:
        claim["readOnly"] = True
    return {"name": VOLUME, "persistentVolumeClaim": claim}


def _mount(log_dir: LogDir, read_only: bool) -> Json:
    mount: Json = {"name": VOLUME, "mountPath": MOUNT}
    if log_dir.sub_path:
        mount["subPath"] = log_dir.sub_path
    if read_only:
        mount["readOnly"] = True
    return mount


def _with_replica_env(draft: Draft, log_dir: LogDir, values: Mapping[str, str]) -> Draft:
    return draft.with_templates(lambda rtype, template: _with_training_env(template, log_dir, rtype, values))


def _with_training_env(template: Json, log_dir: LogDir, rtype: str, values: Mapping[str, str]) -> Json:
    spec = dict(template.get("spec") or {})
    wanted = _replica_env(log_dir, rtype, values)
    containers = []
    for container in spec.get("containers") or []:
        if not isinstance(container, dict):
            containers.append(container)
            continue
        env = list(container.get("env") or [])
        names = {e.get("name") for e in env if isinstance(e, dict)}
        env += [e for e in wanted if e["name"] not in names]
        updated: Json = {**container, "env": env}
        if log_dir.scheme == "s3" and values.get(SECRET):
            refs = list(container.get("envFrom") or [])
            ref = {"secretRef": {"name": values[SECRET]}}
            updated["envFrom"] = refs if ref in refs else [*refs, ref]
        if log_dir.scheme == "pvc":
            mounts = list(container.get("volumeMounts") or [])
            if not any(isinstance(m, dict) and m.get("name") == VOLUME for m in mounts):
                mounts.append(_mount(log_dir, read_only=False))
            updated["volumeMounts"] = mounts
        containers.append(updated)
    spec["containers"] = containers
    if log_dir.scheme == "pvc":
        volumes = list(spec.get("volumes") or [])
        if not any(isinstance(v, dict) and v.get("name") == VOLUME for v in volumes):
            volumes.append(_volume(log_dir, read_only=False))
        spec["volumes"] = volumes
    return {**template, "spec": spec}


def _check_training_env(draft: Draft, log_dir: LogDir, values: Mapping[str, str], result: Result) -> None:
    """A template variable or volume of ours that the user set otherwise would silently win: refuse it."""
    info = draft.info
    if info is None:
        return
    for rtype, template in draft.templates():
        spec = template.get("spec")
        if not isinstance(spec, dict):
            continue
        base = f"spec.{info.replica_field}[{rtype}].template.spec"
        wanted = {e["name"]: e for e in _replica_env(log_dir, rtype, values)}
        for i, container in enumerate(spec.get("containers") or []):
            for j, var in enumerate((container or {}).get("env") or []):
                name = var.get("name") if isinstance(var, dict) else None
                if name in wanted and var != wanted[name]:
                    result.error(
                        f"{base}.containers[{i}].env[{j}]",
                        f"Invalid value: {name} is set by {ANNOTATION}; remove it from the template",
                    )
        for i, volume in enumerate(spec.get("volumes") or []):
            ours = isinstance(volume, dict) and volume.get("name") == VOLUME and log_dir.scheme == "pvc"
            if ours and volume != _volume(log_dir, read_only=False):
                result.error(
                    f"{base}.volumes[{i}]",
                    f'Invalid value: the volume name "{VOLUME}" is taken by {ANNOTATION}; rename it',
                )
