"""Links configured by the operator of the UI: URL templates over a job's or a pod's fields.

`${metadata.namespace}` is the value at that dotted path of the object (URL-quoted; empty when absent),
`${metadata.labels['app.kubernetes.io/name']}` reaches a key with dots. Scope `job` links show on the list
and the job's page; scope `replica` links beside each replica type of a job's page, over the job's fields
and `${replica.type}`; scope `pod` links beside each pod, over its fields and the job's under `job.`.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainop.jsontypes import Json

SCOPES = ("job", "replica", "pod")
_FIELD = re.compile(r"\$\{([^}]*)\}")
_PART = re.compile(r"\[['\"]([^'\"]+)['\"]\]|([^.\[\]]+)")


@dataclass(frozen=True)
class Link:
    name: str
    scope: str
    url: str

    def expand(self, obj: Json) -> str:
        return _FIELD.sub(lambda m: urllib.parse.quote(_value(obj, m.group(1)), safe=""), self.url)


def _value(obj: Any, path: str) -> str:
    for quoted, plain in _PART.findall(path.strip()):
        obj = obj.get(quoted or plain) if isinstance(obj, dict) else None
    return "" if obj is None or isinstance(obj, dict | list) else str(obj)


def load_links(path: Path) -> list[Link]:
    """The links of a YAML file: a list of {name, scope, url}; raises ValueError naming what is wrong."""
    try:
        items = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read the links ({exc})") from exc
    if not isinstance(items, list):
        raise ValueError(f"{path}: must hold a list of links, each with name, scope and url")
    links = []
    for i, item in enumerate(items):
        where = f"{path}: links[{i}]"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: must be a mapping with name, scope and url")
        name, scope, url = item.get("name"), item.get("scope", "job"), item.get("url")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name: required, the text of the link")
        if scope not in SCOPES:
            raise ValueError(f"{where}.scope: must be one of {', '.join(SCOPES)}, not {scope!r}")
        if not isinstance(url, str) or not url.startswith(("http://", "https://", "/")):
            raise ValueError(
                f"{where}.url: required, an http(s) URL or a path, e.g. https://x/${{metadata.name}}"
            )
        links.append(Link(name, scope, url))
    return links
