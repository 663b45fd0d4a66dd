"""The examples shipped inside the package, so they run without a clone of the repository.

Each folder holds `job.yaml` (a kubeflow.org/v1 job whose first comment line is the example's one-line
description) and the scripts it runs. An example's document is what `trainop examples show` prints and
`trainop run example:NAME` runs: the job's header comment, then one ConfigMap holding every script of the
folder, then the job, which mounts that ConfigMap. The script travels with the job, so one generic image
per framework serves every example (README.md, "Examples without a clone").

Two additions for examples that differ from another one only in their job: a folder whose file
`scripts-from` names another example ships that example's scripts instead of copies of them, and a
`job.yaml` may hold, before the job, other objects the job needs on a cluster (a ResourceClaimTemplate),
which follow the ConfigMap in the document.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml

from trainop.frameworks import kind_info
from trainop.suggest import did_you_mean

Json = dict[str, Any]

JOB_FILE = "job.yaml"
SCRIPTS_FROM = "scripts-from"


class UnknownExampleError(LookupError):
    """No packaged example has that name; the message lists the ones there are."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no example named {name!r}{did_you_mean(name, names())}; the examples are: {', '.join(names())}"
        )


@dataclass(frozen=True)
class Example:
    name: str
    kind: str
    description: str
    # The multi-document YAML: ConfigMap with the scripts, then the job.
    document: str
    # The kubeflow.org job alone, as the document holds it.
    job: Json


def _root() -> Traversable:
    return resources.files(__name__)


def names() -> list[str]:
    return sorted(d.name for d in _root().iterdir() if d.is_dir() and d.joinpath(JOB_FILE).is_file())


def examples() -> list[Example]:
    return [example(n) for n in names()]


def example(name: str) -> Example:
    if name not in names():
        raise UnknownExampleError(name)
    folder = _root().joinpath(name)
    job_text = folder.joinpath(JOB_FILE).read_text()
    header, body = _split_header(job_text)
    job = _the_job(name, body)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": _mounted_config_map(name, job)},
        "data": _scripts(name, folder),
    }
    document = header + yaml.dump(config_map, Dumper=_LiteralDumper, sort_keys=False) + "---\n" + body
    description = header.splitlines()[0].removeprefix("#").strip() if header else ""
    return Example(name, str(job["kind"]), description, document, job)


def _scripts(name: str, folder: Traversable) -> dict[str, str]:
    """File name -> text of the scripts the example ships: its folder's own, or those of the example its
    `scripts-from` names (never both, so what runs is never in doubt)."""
    own = {
        f.name: f.read_text()
        for f in sorted(folder.iterdir(), key=lambda f: f.name)
        if f.is_file() and f.name not in (JOB_FILE, SCRIPTS_FROM) and not f.name.startswith(".")
    }
    source = folder.joinpath(SCRIPTS_FROM)
    if not source.is_file():
        return own
    other = source.read_text().strip()
    if own:
        raise ValueError(
            f"example {name}: has scripts of its own ({', '.join(own)}) and {SCRIPTS_FROM} ({other}); keep "
            "one of them"
        )
    if other == name or other not in names() or _root().joinpath(other, SCRIPTS_FROM).is_file():
        raise ValueError(
            f"example {name}: {SCRIPTS_FROM} names {other!r}, which is not another example with scripts of "
            f"its own; the examples are: {', '.join(names())}"
        )
    return _scripts(other, _root().joinpath(other))


def _the_job(name: str, body: str) -> Json:
    """The one kubeflow.org job of `job.yaml`, which comes last, after any object it needs."""
    docs = [d for d in yaml.safe_load_all(body) if d is not None]
    if not docs or str(docs[-1].get("apiVersion", "")).split("/")[0] != "kubeflow.org":
        raise ValueError(f"example {name}: {JOB_FILE} must end with its kubeflow.org job")
    if any(str(d.get("apiVersion", "")).startswith("kubeflow.org/") for d in docs[:-1]):
        raise ValueError(f"example {name}: {JOB_FILE} holds more than one job; an example is one job")
    job: Json = docs[-1]
    return job


def _split_header(text: str) -> tuple[str, str]:
    """(the leading comment block, the rest): the comment then heads the whole document."""
    lines = text.splitlines(keepends=True)
    n = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return "".join(lines[:n]), "".join(lines[n:])


def _mounted_config_map(name: str, job: Json) -> str:
    """The one ConfigMap the job's replicas mount: the scripts go into it."""
    mounted = {
        str((volume.get("configMap") or {}).get("name"))
        for rspec in _replica_specs(job)
        for volume in ((rspec.get("template") or {}).get("spec") or {}).get("volumes") or []
        if "configMap" in volume
    }
    if len(mounted) != 1:
        raise ValueError(
            f"example {name}: its job mounts {len(mounted)} ConfigMaps ({sorted(mounted)}); an example's "
            "job mounts exactly one, the ConfigMap its scripts are shipped in"
        )
    return mounted.pop()


def _replica_specs(job: Json) -> list[Json]:
    specs = (job.get("spec") or {}).get(kind_info(str(job.get("kind"))).replica_field) or {}
    return [rspec for rspec in specs.values() if isinstance(rspec, dict)]


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings as `|` blocks, so a script reads as the script it is."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_LiteralDumper.add_representer(str, _represent_str)
