"""Reading the one job a `trainop run` file holds, with errors a user can act on."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from trainop.api.kinds import UnknownKindError
from trainop.api.times import timestamp
from trainop.frameworks import KINDS, kind_info

Json = dict[str, Any]


class ManifestError(Exception):
    """The file cannot be run: not YAML, no job, several jobs, or a kind we do not serve."""


@dataclass(frozen=True)
class Manifest:
    job: Json
    path: Path

    @property
    def base_dir(self) -> Path:
        """Relative paths in the job (workingDir, an unset workingDir) resolve against the YAML's folder."""
        return self.path.resolve().parent


def load(path: Path) -> Manifest:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return Manifest(parse(text, str(path)), path)


def parse(text: str, source: str = "<stdin>") -> Json:
    """The single kubeflow.org job in `text` (a YAML stream), as the apiserver would receive it."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}: not valid YAML: {exc}") from None
    if not docs:
        raise ManifestError(f"{source}: holds no document; expected one job (kinds: {', '.join(KINDS)})")
    jobs: list[Json] = []
    for number, doc in enumerate(docs, start=1):
        if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
            raise ManifestError(f"{source}: document {number} has no kind; expected a kubeflow.org/v1 job")
        try:
            kind_info(doc["kind"])
        except UnknownKindError as exc:
            raise ManifestError(
                f"{source}: document {number}: {exc}; trainop run runs one job per file"
            ) from None
        jobs.append(doc)
    if len(jobs) > 1:
        names = ", ".join(f"{j['kind']}/{(j.get('metadata') or {}).get('name', '?')}" for j in jobs)
        raise ManifestError(f"{source}: holds {len(jobs)} jobs ({names}); trainop run runs one job per file")
    return jobs[0]


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
