"""The customize hook as a pure function: which related objects Metacontroller sends with a job's syncs.

The sync must see an object that holds the name of a ConfigMap the job's pods run but is not the
job's (trainop.job.mounts), and Metacontroller's `children` hold only what the job owns or adopts. So
the CompositeControllers declare `hooks.customize`, and for each job this answers one rule: the
ConfigMaps of those names in the job's namespace (MPI's `<job>-config`, every extension's shipped file
`<job>-jsonlogs`, `<job>-tf-server`). Metacontroller (v4.17.2, hook version v1) lists them from its
informer and passes them in the sync request's `related`, keyed `ConfigMap.v1` -> name, and syncs the
job again when one of them is created, changed or deleted.

Metacontroller caches this answer per job uid and generation (for 20 minutes), and a job's annotations
can change without a new generation, so the answer depends on the job's kind, name and namespace only:
the names of every ConfigMap the job could mount, whether or not its annotations ask for them now.
"""

from __future__ import annotations

from trainop import extensions
from trainop.frameworks import framework
from trainop.jsontypes import Json


def related_resources(kind: str, name: str, namespace: str) -> Json:
    """The customize hook's answer for the job `namespace/name` of `kind`."""
    names = [*framework(kind).mounted_names(name), *extensions.shipped_names(name)]
    rule = {"apiVersion": "v1", "resource": "configmaps", "namespace": namespace, "names": names}
    return {"relatedResources": [rule] if names else []}
