"""ConfigMaps whose content a job's pods run, and whether a pod may mount one yet: one rule for all.

MPI's `<job>-config` (kubexec.sh, run by mpirun in the launcher) and the extensions' shipped files
(`<job>-jsonlogs`, first on PYTHONPATH; `<job>-tf-server`, run as the server) are children named after
the job, so anyone who may create ConfigMaps in the namespace can create one of that name first.
Metacontroller then logs "child object already exists" and creates the pods anyway, which would run the
planted program. So a pod that mounts one of them is desired only once the ConfigMap is observed among
the job's children, controlled by the job (its controller reference has the job's uid, which
Metacontroller sets on every child it creates or adopts), holding what the program needs: the files we
write, byte for byte, and for the files that change between syncs (MPI's hostfile) content of the form
we write. Until then the pods wait, like MPI's launcher for its ServiceAccount, and the ConfigMap stays
desired, so Metacontroller creates it or updates it in place.

A same-named object that is not the job's never becomes the job's by waiting: it is `FOREIGN`, and the
sync reports it (a Warning Event and the job's condition) so that someone deletes or renames it. The
sync sees such an object only through Metacontroller's related resources (the CompositeController's
customize hook asks for these names in the job's namespace), as Metacontroller's children hold only
what the job owns or adopts. Pure: decided from what Metacontroller sent, no API call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from trainop.job.observed import Children
from trainop.jsontypes import Json

CONFIG_MAP: Final = "ConfigMap.v1"


@dataclass(frozen=True)
class Mounted:
    """A ConfigMap child of the job that some of its pods mount and run."""

    name: str
    # The data keys the pods read whose content is ours byte for byte (a program).
    exact: Mapping[str, str]
    # Data keys whose content changes between syncs, each with a check that it has the form we write.
    forms: Mapping[str, Callable[[str], bool]] = field(default_factory=dict)
    # The whole ConfigMap is mounted (no `items`): a key we do not write would be a file beside ours
    # (a module first on PYTHONPATH), so none may exist.
    whole: bool = False
    # The canonical replica types whose pods mount it; None for every type.
    replica_types: frozenset[str] | None = None
    # What the pods run from it, for the report ("sitecustomize.py").
    what: str = ""

    def mounted_by(self, rtype: str) -> bool:
        return self.replica_types is None or rtype in self.replica_types

    def strangers(self, obj: Json) -> list[str]:
        """The keys of `obj` that would be files beside ours and that we never write: an update in
        place keeps them (Metacontroller's three-way merge removes only keys it applied before)."""
        if not self.whole:
            return []
        keys = {str(k) for f in ("data", "binaryData") if isinstance(obj.get(f), dict) for k in obj[f]}
        return sorted(keys - {*self.exact, *self.forms})

    def holds_ours(self, obj: Json) -> bool:
        """Whether `obj`'s data is what the pods may run."""
        data = obj.get("data")
        data = data if isinstance(data, dict) else {}
        if self.strangers(obj) or any(data.get(k) != v for k, v in self.exact.items()):
            return False
        return all(isinstance(data.get(k), str) and ok(data[k]) for k, ok in self.forms.items())


class Standing(Enum):
    # Observed among the job's children, controlled by the job, holding what the pods may run.
    READY = "ready"
    # Not yet: Metacontroller has still to create it, or to update the job's own in place.
    PENDING = "pending"
    # An object of that name exists that is not the job's, and waiting will not make it so.
    FOREIGN = "foreign"


@dataclass(frozen=True)
class Check:
    """One mounted ConfigMap of the job as this sync saw it."""

    mounted: Mounted
    standing: Standing
    # FOREIGN: why the object is not the job's, a clause ("it has no controller").
    why: str = ""
    # FOREIGN: the object's uid (or name), so that each planted object is reported once.
    occurrence: str = ""

    def blocks(self, rtype: str) -> bool:
        """Whether a pod of `rtype` that does not exist yet must wait."""
        return self.standing is not Standing.READY and self.mounted.mounted_by(rtype)


def controller_ref(job: Json) -> Json:
    """The controller reference Metacontroller sets on every child it creates (MakeControllerRef)."""
    meta = job.get("metadata") or {}
    return {
        "apiVersion": job.get("apiVersion"),
        "kind": job.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: Json) -> str | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((str(r.get("uid") or "") for r in refs if isinstance(r, dict) and r.get("controller")), None)


def _controller(obj: Json) -> str:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    ref = next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)
    return f"{ref.get('kind')} {ref.get('name')}" if ref else ""


def _named(group: Mapping[str, Json] | None, name: str, namespace: str) -> Json | None:
    """The object called `name` in `namespace` among one child type's (v1 `name`, v2 `ns/name` keys)."""
    for obj in (group or {}).values():
        meta = obj.get("metadata") or {}
        if meta.get("name") == name and (meta.get("namespace") or namespace) == namespace:
            return obj
    return None


def check(mounted: Mounted, uid: str, namespace: str, children: Children, related: Children) -> Check:
    """Where `mounted` stands for the job `uid` in `namespace`, from its observed children and the
    related objects Metacontroller sent (both keyed `<Kind>.<apiVersion>` -> name -> object)."""
    child = _named(children.get(CONFIG_MAP), mounted.name, namespace)
    if child is not None:
        occurrence = str(child["metadata"].get("uid") or mounted.name)
        if not uid or controller_uid(child) != uid:
            return Check(mounted, Standing.FOREIGN, _not_controlled(child), occurrence)
        if mounted.holds_ours(child):
            return Check(mounted, Standing.READY)
        strangers = mounted.strangers(child)
        if strangers:
            why = f"it holds {', '.join(strangers)}, which trainop does not write and would not remove"
            return Check(mounted, Standing.FOREIGN, why, occurrence)
        if child.get("immutable") is True:
            # Metacontroller cannot update it in place, so its content stays someone else's.
            why = "it is immutable and holds content trainop did not write"
            return Check(mounted, Standing.FOREIGN, why, occurrence)
        return Check(mounted, Standing.PENDING)
    other = _named(related.get(CONFIG_MAP), mounted.name, namespace)
    if other is not None and (not uid or controller_uid(other) != uid):
        occurrence = str(other["metadata"].get("uid") or mounted.name)
        return Check(mounted, Standing.FOREIGN, _not_controlled(other), occurrence)
    return Check(mounted, Standing.PENDING)


def _not_controlled(obj: Json) -> str:
    owner = _controller(obj)
    return f"it is controlled by {owner}" if owner else "it has no controller"


# The reason of the job's condition (prefixed with the kind) and of the Warning Event.
NOT_OWNED: Final = "ConfigMapNotOwned"


def report(found: Check, kind: str, namespace: str, job: str) -> str:
    """What the job's condition and Warning Event say about a FOREIGN ConfigMap: which, why, what to do."""
    what = f" its {found.mounted.what}" if found.mounted.what else " it"
    return (
        f"delete or rename ConfigMap {namespace}/{found.mounted.name}; it is not owned by {kind} {job} "
        f"({found.why}), so the job's pods that would run{what} wait until it is gone and the job's "
        "own is created"
    )
