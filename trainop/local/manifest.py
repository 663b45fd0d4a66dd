"""Reading what `trainop run` runs: one kubeflow.org job and the ConfigMaps it mounts, from a file, an
https URL or a packaged example (`example:NAME`), with errors a user can act on."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from trainop.api.kinds import UnknownKindError
from trainop.api.times import timestamp
from trainop.examples import UnknownExampleError, example
from trainop.frameworks import KINDS, kind_info
from trainop.jsontypes import Json
from trainop.local.fetch import FetchError, fetch, is_url
from trainop.suggest import did_you_mean

EXAMPLE_PREFIX = "example:"
# What the apiserver allows (k8s.io/apimachinery validation): names are DNS subdomains, keys file names.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
MAX_NAME = 253
MAX_CONFIG_MAP_BYTES = 1024 * 1024
ACCEPTED = "one kubeflow.org/v1 job and the ConfigMaps its volumes mount"
DRA_GROUP = "resource.k8s.io"
# Locally nothing allocates a claim: no DRA driver publishes ResourceSlices here, so a pod with claims
# would wait for an allocation forever, where kube-scheduler would keep it Pending.
NO_DRA = (
    "trainop run does not allocate Dynamic Resource Allocation claims (no DRA driver or ResourceSlices "
    "on this machine); apply the file to a cluster with a DRA driver (`kubectl apply -f`), or ask for "
    "this machine's devices with resources.limits or a trainop.dev/accelerator annotation "
    "(docs/accelerators.md)"
)


class ManifestError(Exception):
    """What was given cannot be run: not YAML, no job or several, a kind we do not take, a bad ConfigMap."""


@dataclass(frozen=True)
class Manifest:
    job: Json
    # Name -> the ConfigMap as written in the file; pods mount them as they would on a cluster.
    config_maps: dict[str, Json] = field(default_factory=dict)
    # Relative paths in the job (workingDir, an unset workingDir) resolve here: a file's own folder, the
    # current directory for a URL or a packaged example.
    base_dir: Path = field(default_factory=Path.cwd)


def load(source: str | Path, ca_file: Path | None = None) -> Manifest:
    """`source` as the user wrote it: `example:NAME`, an https URL, or a path."""
    text = str(source)
    if ca_file is not None and not is_url(text):
        raise ManifestError(
            f"{text}: --ca-file applies to an https URL only; drop it for a file or an example"
        )
    if text.startswith(EXAMPLE_PREFIX):
        try:
            document = example(text.removeprefix(EXAMPLE_PREFIX)).document
        except UnknownExampleError as exc:
            raise ManifestError(f"{text}: {exc}") from None
        return parse(document, text)
    if is_url(text):
        try:
            return parse(fetch(text, ca_file), text)
        except FetchError as exc:
            raise ManifestError(f"{text}: {exc}") from None
    path = Path(source)
    try:
        content = path.read_text()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path}: not UTF-8 text (byte {exc.start}); expected a YAML file") from None
    return parse(content, str(path), path.resolve().parent)


def parse(text: str, source: str = "<stdin>", base_dir: Path | None = None) -> Manifest:
    """The job and ConfigMaps of `text` (a YAML stream), as the apiserver would receive them."""
    try:
        docs = [(n, d) for n, d in enumerate(yaml.safe_load_all(text), start=1) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}: not valid YAML: {exc}") from None
    if not docs:
        raise ManifestError(f"{source}: holds no document; expected one job (kinds: {', '.join(KINDS)})")
    jobs: list[Json] = []
    config_maps: list[tuple[int, Json]] = []
    for number, doc in docs:
        where = f"{source}: document {number}"
        if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
            raise ManifestError(f"{where} has no kind; expected {ACCEPTED}")
        if doc["kind"] == "ConfigMap":
            config_maps.append((number, doc))
            continue
        if str(doc.get("apiVersion", "")).split("/")[0] == DRA_GROUP:
            raise ManifestError(
                f"{where}: kind {doc['kind']} ({doc['apiVersion']}) is not accepted: {NO_DRA}"
            )
        if doc["kind"] == "Secret":
            raise ManifestError(
                f"{where}: kind Secret is not accepted: trainop run takes {ACCEPTED}; a Secret in a file "
                "is plain text to anyone who has the file, and locally secret volumes are not mounted. Pods "
                "inherit this shell's environment: pass credentials there"
            )
        try:
            kind_info(doc["kind"])
        except UnknownKindError:
            raise ManifestError(
                f"{where}: kind {doc['kind']} is not accepted{did_you_mean(doc['kind'], KINDS)}: trainop run "
                f"takes {ACCEPTED} (job kinds: {', '.join(KINDS)})"
            ) from None
        jobs.append(doc)
    if not jobs:
        raise ManifestError(f"{source}: holds no job; expected {ACCEPTED} (job kinds: {', '.join(KINDS)})")
    if len(jobs) > 1:
        names = ", ".join(f"{j['kind']}/{(j.get('metadata') or {}).get('name', '?')}" for j in jobs)
        raise ManifestError(f"{source}: holds {len(jobs)} jobs ({names}); trainop run runs one job per file")
    job = jobs[0]
    maps = _config_maps(job, config_maps, source)
    _check_mounted(job, maps, source)
    _check_no_claims(job, source)
    return Manifest(job, maps, base_dir or Path.cwd())


def _config_maps(job: Json, docs: list[tuple[int, Json]], source: str) -> dict[str, Json]:
    namespace = (job.get("metadata") or {}).get("namespace") or "default"
    out: dict[str, Json] = {}
    for number, doc in docs:
        where = f"{source}: document {number} (ConfigMap)"
        if doc.get("apiVersion") != "v1":
            raise ManifestError(
                f'{where}: apiVersion: Unsupported value: {doc.get("apiVersion")!r}: use "v1"'
            )
        meta = doc.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or len(name) > MAX_NAME or not _DNS_SUBDOMAIN.match(name):
            raise ManifestError(
                f"{where}: metadata.name: Invalid value: {name!r}: a lowercase DNS subdomain is required "
                "(letters, digits, '-' and '.', at most 253 characters)"
            )
        where = f'{source}: document {number} (ConfigMap "{name}")'
        if (meta.get("namespace") or "default") != namespace:
            raise ManifestError(
                f"{where}: metadata.namespace: Invalid value: {meta.get('namespace')!r}: the job is in "
                f"namespace {namespace!r} and a pod mounts only ConfigMaps of its own namespace"
            )
        if name in out:
            raise ManifestError(
                f"{where}: metadata.name: Duplicate value: the file holds two ConfigMaps {name!r}"
            )
        if doc.get("binaryData"):
            raise ManifestError(
                f"{where}: binaryData: locally only data (text) is written to the mounted files; put the "
                "content in data"
            )
        data = doc.get("data") or {}
        if not isinstance(data, dict):
            raise ManifestError(f"{where}: data: Invalid value: must be a map of file names to text")
        size = 0
        for key, value in data.items():
            if (
                not isinstance(key, str)
                or key in (".", "..")
                or not _CONFIG_KEY.match(key)
                or len(key) > MAX_NAME
            ):
                raise ManifestError(
                    f"{where}: data[{key!r}]: Invalid value: a key is a file name of letters, digits, "
                    "'-', '_' and '.' (not '.' or '..', at most 253 characters)"
                )
            if not isinstance(value, str):
                raise ManifestError(f"{where}: data[{key!r}]: Invalid value: must be a string; quote it")
            size += len(key) + len(value.encode())
        if size > MAX_CONFIG_MAP_BYTES:
            raise ManifestError(f"{where}: data: Too long: {size} bytes, at most {MAX_CONFIG_MAP_BYTES}")
        out[name] = doc
    return out


def _valid_key(key: str) -> bool:
    return key not in (".", "..") and len(key) <= MAX_NAME and bool(_CONFIG_KEY.match(key))


def _check_mounted(job: Json, config_maps: dict[str, Json], source: str) -> None:
    """Every ConfigMap the job mounts is in the file: locally nothing else could provide it, and the pod
    would wait in ContainerCreating forever, as kubelet holds a pod whose ConfigMap is missing."""
    info = kind_info(str(job["kind"]))
    for rtype, rspec in ((job.get("spec") or {}).get(info.replica_field) or {}).items():
        volumes = (((rspec or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
        for i, volume in enumerate(volumes):
            ref = (volume or {}).get("configMap") if isinstance(volume, dict) else None
            if not isinstance(ref, dict) or ref.get("optional") or ref.get("name") in config_maps:
                continue
            raise ManifestError(
                f"{source}: spec.{info.replica_field}.{rtype}.template.spec.volumes[{i}].configMap.name: "
                f"Not found: {ref.get('name')!r}: add the ConfigMap to the file before the job "
                f"(ConfigMaps in the file: {', '.join(sorted(config_maps)) or 'none'})"
            )


def _check_no_claims(job: Json, source: str) -> None:
    info = kind_info(str(job["kind"]))
    for rtype, rspec in ((job.get("spec") or {}).get(info.replica_field) or {}).items():
        if (((rspec or {}).get("template") or {}).get("spec") or {}).get("resourceClaims"):
            raise ManifestError(
                f"{source}: spec.{info.replica_field}.{rtype}.template.spec.resourceClaims: {NO_DRA}"
            )


def as_created(job: Json, now: datetime) -> Json:
    """The job as the apiserver stores it on create: namespace, uid and creation time filled in."""
    meta = dict(job.get("metadata") or {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", str(uuid.uuid4()))
    meta.setdefault("creationTimestamp", timestamp(now))
    meta.setdefault("generation", 1)
    return {**job, "metadata": meta}
