"""How pages show a job's numbers and links: ages, row ids and the links of a job, a replica type or a
pod."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from trainop.extensions import EXTENSIONS, owned
from trainop.jsontypes import Json
from trainop.ui.links import Link
from trainop.ui.views.context import Ui


def row_id(key: str) -> str:
    return "r" + hashlib.sha1(key.encode()).hexdigest()[:12]


def age(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(max(seconds, 0))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            rest = seconds % size // (size // 60 if unit != "m" else 1)
            return f"{seconds // size}{unit}{rest}{'h' if unit == 'd' else 'm' if unit == 'h' else 's'}"
    return f"{seconds}s"


def job_links(
    ui: Ui, obj: Json, scope: str = "job", served: tuple[tuple[str, str], ...] = ()
) -> list[tuple[str, str]]:
    """The links of `scope` over `obj`; a job's extension links first (its TensorBoard): to what its
    source knows the address of (`served`, a local run's record), else, where the job's annotations
    make the sync serve it, through the template of the UI's settings."""
    settings = ui.settings
    links = [(link.name, link.expand(obj)) for link in settings.links if link.scope == scope]
    if scope != "job":
        return links
    addresses = dict(served)
    first: list[tuple[str, str]] = []
    for ext in EXTENSIONS:
        for link in ext.links:
            template = str(getattr(settings, link.setting, "") or "")
            if addresses.get(link.key):
                first.append((link.name, addresses[link.key]))
            elif ui.source.serves_addons and template and ext.linked(link, owned(ext, obj)):
                first.append((link.name, Link(link.name, "job", template).expand(obj)))
    return first + links


@dataclass(frozen=True)
class PageLinks:
    """A job page's links of a replica type (`${replica.type}` beside the job's fields) or of a pod (the
    pod's own fields, the job's under `job.`)."""

    job: Json
    expand: Callable[[Json, str], list[tuple[str, str]]]
    scopes: set[str]

    def __call__(self, scope: str, thing: Any) -> list[tuple[str, str]]:
        if scope == "replica":
            return self.expand({**self.job, "replica": {"type": thing}}, "replica")
        return self.expand({**thing, "job": self.job}, "pod")


def links_of(ui: Ui, job: Json) -> PageLinks:
    return PageLinks(job, partial(job_links, ui), {link.scope for link in ui.settings.links})
