"""The one place the cluster UI builds apiserver paths, from parts it has checked first.

A job key (`namespace/kind/name`) comes from the URL a browser asked for. An empty or malformed part would
otherwise change what the path names: `ns/PyTorchJob/` is the collection of the namespace's PyTorchJobs
(its DELETE a deletecollection), `a/b` in a name another resource. So every part is checked against the
apiserver's own rules for it (namespace and container: DNS labels; job and pod names: DNS subdomains;
the kind: one of the served kinds) and URL-quoted where it goes into the path.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from trainop.frameworks import KINDS, kind_info
from trainop.ui.source import BadKey

GROUP = "kubeflow.org/v1"
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_MAX = 63
SUBDOMAIN_MAX = 253
_RULE = "lower-case letters, digits and '-', starting and ending with a letter or digit"


def check_label(what: str, value: str) -> str:
    """`value` when it is a DNS label (RFC 1123: what namespaces and container names are)."""
    if not value:
        raise BadKey([("", f"the {what} is empty")])
    if len(value) > LABEL_MAX or not _LABEL.fullmatch(value):
        raise BadKey([("", f"{what} {value!r} is not a DNS label ({_RULE}, at most {LABEL_MAX} characters)")])
    return value


def check_subdomain(what: str, value: str) -> str:
    """`value` when it is a DNS subdomain (RFC 1123: what job and pod names are)."""
    if not value:
        raise BadKey([("", f"the {what} is empty")])
    if len(value) > SUBDOMAIN_MAX or not all(_LABEL.fullmatch(part) for part in value.split(".")):
        rule = f"labels of {_RULE} joined by dots, at most {SUBDOMAIN_MAX} characters"
        raise BadKey([("", f"{what} {value!r} is not a DNS subdomain ({rule})")])
    return value


@dataclass(frozen=True)
class JobRef:
    namespace: str
    kind: str
    name: str


def parse_key(key: str) -> JobRef:
    """The job a key names, every part checked; BadKey says which part is wrong and why."""
    parts = key.split("/")
    if len(parts) != 3:
        raise BadKey([("", f"not a job key (namespace/kind/name): {key!r}")])
    namespace, kind, name = parts
    if kind not in KINDS:
        raise BadKey([("", f"unknown kind {kind!r} in {key!r}: one of {', '.join(sorted(KINDS))}")])
    return JobRef(check_label("namespace", namespace), kind, check_subdomain("job name", name))


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _query(path: str, query: Mapping[str, str | int] | None) -> str:
    return f"{path}?{urllib.parse.urlencode(query)}" if query else path


def jobs_path(namespace: str, kind: str, query: Mapping[str, str | int] | None = None) -> str:
    """The collection of a kind's jobs in a namespace: only ever POSTed to (a create)."""
    if kind not in KINDS:
        raise BadKey([("", f"unknown kind {kind!r}: one of {', '.join(sorted(KINDS))}")])
    ns = _q(check_label("namespace", namespace))
    return _query(f"/apis/{GROUP}/namespaces/{ns}/{kind_info(kind).plural}", query)


def job_path(job: JobRef) -> str:
    """One job: never a collection, since every part was checked non-empty."""
    return f"{jobs_path(job.namespace, job.kind)}/{_q(check_subdomain('job name', job.name))}"


def pods_path(namespace: str, query: Mapping[str, str | int]) -> str:
    return _query(f"/api/v1/namespaces/{_q(check_label('namespace', namespace))}/pods", query)


def events_path(namespace: str, query: Mapping[str, str | int]) -> str:
    return _query(f"/api/v1/namespaces/{_q(check_label('namespace', namespace))}/events", query)


def log_path(namespace: str, pod: str, container: str, query: Mapping[str, str | int]) -> str:
    ns = _q(check_label("namespace", namespace))
    name = _q(check_subdomain("pod name", pod))
    return _query(
        f"/api/v1/namespaces/{ns}/pods/{name}/log",
        {"container": check_label("container", container), **query},
    )


def config_maps_path(namespace: str, query: Mapping[str, str | int] | None = None) -> str:
    """The namespace's ConfigMaps: only ever POSTed to (a create)."""
    return _query(f"/api/v1/namespaces/{_q(check_label('namespace', namespace))}/configmaps", query)


def config_map_path(namespace: str, name: str, query: Mapping[str, str | int] | None = None) -> str:
    path = f"/api/v1/namespaces/{_q(check_label('namespace', namespace))}/configmaps"
    return _query(f"{path}/{_q(check_subdomain('ConfigMap name', name))}", query)
