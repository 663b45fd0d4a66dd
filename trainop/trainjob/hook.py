"""A TrainJob's hook calls, as pure functions: what Metacontroller sends in, what it is answered.

The runtime is not the job's child: the CompositeController's customize hook names it as a related
resource (a ClusterTrainingRuntime cluster-wide, a TrainingRuntime in the job's namespace), and
Metacontroller sends it with every sync and syncs the job again when it changes. `runtimeRef` is
immutable (the CRD says so), so Metacontroller's cached customize answer (per uid and generation) never
goes stale. The TrainJob controller's hooks are version v2: a v1 sync request drops every cluster-scoped
related object of a namespaced parent, a ClusterTrainingRuntime among them. In a v2 request, children and
related objects are keyed `<namespace>/<name>`, or `<name>` when cluster-scoped.
"""

from __future__ import annotations

from trainop.api.jsonvalues import clean
from trainop.jsontypes import Json
from trainop.trainjob import constants as c
from trainop.trainjob.shapes import mapping
from trainop.trainjob.sync import RUNTIME_KINDS, SNAPSHOT_SUFFIX, Observed, Outcome

JOBSET_CHILDREN = f"JobSet.{c.JOBSET_API_VERSION}"
CONFIGMAP_CHILDREN = "ConfigMap.v1"
RUNTIME_RESOURCES = {
    "ClusterTrainingRuntime": "clustertrainingruntimes",
    "TrainingRuntime": "trainingruntimes",
}


def related_resources(job: Json) -> Json:
    """The customize hook's answer: the one runtime the job refers to, or nothing for a reference
    the engine does not serve (the sync then fails the job with TrainingRuntimeNotSupported)."""
    ref = mapping(mapping(job.get("spec")).get("runtimeRef"))
    kind, name = ref.get("kind"), ref.get("name")
    if ref.get("apiGroup") != c.GROUP or kind not in RUNTIME_KINDS or not isinstance(name, str) or not name:
        return {"relatedResources": []}
    rule: Json = {"apiVersion": c.API_VERSION, "resource": RUNTIME_RESOURCES[str(kind)], "names": [name]}
    if kind == "TrainingRuntime":
        rule["namespace"] = mapping(job.get("metadata")).get("namespace")
    return {"relatedResources": [rule]}


def observed(
    job: Json, children: dict[str, dict[str, Json]], related: dict[str, dict[str, Json]]
) -> Observed:
    """The sync's inputs from Metacontroller's v2 request: children and related are keyed
    `<Kind>.<apiVersion>` -> `<namespace>/<name>` (`<name>` when cluster-scoped)."""
    meta = job["metadata"]
    here = f"{meta.get('namespace')}/{meta['name']}"
    ref = mapping(mapping(job.get("spec")).get("runtimeRef"))
    runtimes = related.get(f"{ref.get('kind')}.{c.API_VERSION}") or {}
    key = str(ref.get("name"))
    if ref.get("kind") == "TrainingRuntime":
        key = f"{meta.get('namespace')}/{key}"
    return Observed(
        job=job,
        runtime=runtimes.get(key) if ref.get("apiGroup") == c.GROUP else None,
        jobset=(children.get(JOBSET_CHILDREN) or {}).get(here),
        snapshot=(children.get(CONFIGMAP_CHILDREN) or {}).get(here + SNAPSHOT_SUFFIX),
    )


def response(outcome: Outcome) -> Json:
    """The body Metacontroller expects from a sync hook."""
    out: Json = {"status": outcome.status, "children": outcome.children}
    if outcome.resync_after is not None:
        out["resyncAfterSeconds"] = clean(outcome.resync_after)
    return out
