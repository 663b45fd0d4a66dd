"""The examples shipped inside the package, so they run without a clone of the repository.

Each folder holds `job.yaml` (a kubeflow.org/v1 job whose first comment line is the example's one-line
description) and the scripts it runs. An example's document is what `trainop examples show` prints and
`trainop run example:NAME` runs: the job's header comment, then one ConfigMap holding every script of the
folder, then the job, which mounts that ConfigMap. The script travels with the job, so one generic image
per framework serves every example (README.md, "Examples without a clone").
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import yaml

from trainop.frameworks import kind_info

Json = dict[str, Any]

JOB_FILE = "job.yaml"


class UnknownExampleError(LookupError):
    """No packaged example has that name; the message lists the ones there are."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no example named {name!r}; the examples are: {', '.join(names())}")


@dataclass(frozen=True)
class Example:
    name: str
    kind: str
    description: str
    # The multi-document YAML: ConfigMap with the scripts, then the job.
    document: str


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
    scripts = {
        f.name: f.read_text()
        for f in sorted(folder.iterdir(), key=lambda f: f.name)
        if f.is_file() and f.name != JOB_FILE and not f.name.startswith(".")
    }
    header, body = _split_header(job_text)
    job = yaml.safe_load(body)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": _mounted_config_map(name, job)},
        "data": scripts,
    }
    document = header + yaml.dump(config_map, Dumper=_LiteralDumper, sort_keys=False) + "---\n" + body
    description = header.splitlines()[0].removeprefix("#").strip() if header else ""
    return Example(name, str(job["kind"]), description, document)


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
