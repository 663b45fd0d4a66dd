"""A kubeflow.org/v1 job as a Trainer v2 TrainJob and the TrainingRuntime it runs from (`trainop migrate`).

A v1 job carries its own pod templates; a TrainJob takes them from a runtime. So a job becomes a
TrainingRuntime `<job>` in the job's namespace (one replicatedJob `node` of the framework's ML policy, the
job's pod template with its framework container renamed `node`) and a TrainJob `<job>` that refers to it.
What a TrainJob cannot say is never dropped silently: each such field is named, with why, in
`Migration.not_carried`; so is every variable the v1 pods got that the v2 node does not, found by running
both engines (the v1 sync's pods, the v2 JobSet) on the job.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime

from trainop.admission.admit import admit
from trainop.controller.sync import sync as sync_v1
from trainop.frameworks import FRAMEWORKS, ML_POLICIES
from trainop.frameworks.base import Framework
from trainop.job.settings import Settings
from trainop.jsontypes import Json
from trainop.trainjob import constants as c
from trainop.trainjob.build import desired_jobset
from trainop.trainjob.shapes import mapping

POLICY_OF = {fw.info.kind: policy for policy, fw in ML_POLICIES.items()}
# runPolicy fields a TrainJob has no place for, and why.
NOT_CARRIED_RUN_POLICY = {
    "cleanPodPolicy": "a TrainJob keeps its pods as its JobSet's Jobs keep them",
    "ttlSecondsAfterFinished": "a TrainJob is never deleted after it finishes",
    "schedulingPolicy": "gang scheduling is the runtime's podGroupPolicy, which this version does not build",
}
RESTART_POLICIES = {"OnFailure": "OnFailure", "Never": "Never", "Always": "OnFailure"}
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
# The v1 sync that lists the env a job's pods get needs a time; none of what it lists depends on it.
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class MigrationError(ValueError):
    """The job cannot become a TrainJob; the message names the field and why."""


@dataclass(frozen=True)
class Migration:
    runtime: Json
    train_job: Json
    not_carried: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def objects(self) -> list[Json]:
        return [self.runtime, self.train_job]


def migrate(job: Json) -> Migration:
    kind = str(job.get("kind"))
    if kind not in POLICY_OF:
        supported = ", ".join(sorted(POLICY_OF))
        raise MigrationError(
            f"kind: {kind} has no Trainer v2 ML policy this version builds (it migrates {supported}); "
            "run it as a v1 job"
        )
    fw = FRAMEWORKS[kind]
    admission = admit(job)
    if not admission.checks.ok:
        # Only a job the apiserver would take is migrated: what follows reads it as admission left it.
        raise MigrationError(f"the {kind} is not valid: {admission.checks.message}")
    full = admission.job
    # Admission made sure of a name and of at least one replica type, each one of the kind's.
    meta = mapping(full.get("metadata"))
    name = str(meta["name"])
    spec = mapping(full.get("spec"))
    replicas = mapping(spec.get(fw.info.replica_field))
    root = f"spec.{fw.info.replica_field}"
    types = [rtype for rtype in fw.trainjob_node_types if rtype in replicas]
    not_carried: list[str] = []
    changed: list[str] = []
    first = mapping(replicas[types[0]])
    template = copy.deepcopy(mapping(first.get("template")))
    for rtype in types[1:]:
        if mapping(replicas[rtype]).get("template") != first.get("template"):
            not_carried.append(
                f"{root}[{rtype}].template: differs from {types[0]}'s; every node of a TrainJob runs one "
                f"template, {types[0]}'s"
            )
    nodes = sum(int(mapping(replicas[rtype]).get("replicas") or 0) for rtype in types)
    pod = mapping(template.setdefault("spec", {}))
    where = f"{root}[{types[0]}].template.spec.containers[{fw.info.default_container}]"
    command_note = _node_container(fw, pod, where)
    changed.append(f"{where}: named {c.NODE!r}, the container Trainer gives its env")
    if command_note:
        changed.append(command_note)
    restart = first.get("restartPolicy")
    if restart in RESTART_POLICIES:
        pod["restartPolicy"] = RESTART_POLICIES[restart]
    elif restart is not None:
        not_carried.append(
            f"{root}[{types[0]}].restartPolicy: {restart} has no Job equivalent; the node's pods restart "
            "OnFailure"
        )
        pod["restartPolicy"] = "OnFailure"

    # What the user wrote, not the defaults: a default (cleanPodPolicy None) carries nothing to lose.
    run_policy = mapping(mapping(job.get("spec")).get("runPolicy"))
    job_spec: Json = {"template": template}
    if run_policy.get("backoffLimit") is not None:
        job_spec["backoffLimit"] = run_policy["backoffLimit"]
    for key, why in NOT_CARRIED_RUN_POLICY.items():
        if run_policy.get(key) is not None:
            not_carried.append(f"spec.runPolicy.{key}: {why}")
    runtime = _runtime(name, meta.get("namespace"), POLICY_OF[kind], nodes, job_spec)

    train_spec: Json = {
        "runtimeRef": {"name": name, "apiGroup": c.GROUP, "kind": "TrainingRuntime"},
        "trainer": {"numNodes": nodes},
    }
    if run_policy.get("suspend"):
        train_spec["suspend"] = True
    if run_policy.get("activeDeadlineSeconds") is not None:
        train_spec["activeDeadlineSeconds"] = run_policy["activeDeadlineSeconds"]
    if run_policy.get("managedBy") == MULTIKUEUE:
        train_spec["managedBy"] = MULTIKUEUE
    trainer, lost = fw.trainjob_trainer(spec, command_note is not None)
    train_spec["trainer"].update(trainer)
    not_carried += lost
    train_meta = {
        k: copy.deepcopy(meta[k]) for k in ("name", "namespace", "labels", "annotations") if meta.get(k)
    }
    train_job = {"apiVersion": c.API_VERSION, "kind": "TrainJob", "metadata": train_meta, "spec": train_spec}
    not_carried += _lost_env(fw, full, train_job, runtime)
    return Migration(runtime, train_job, not_carried, changed)


def _node_container(fw: Framework, pod: Json, where: str) -> str | None:
    """Rename the framework's container `node` (Trainer injects its env there) and give it the command
    the TrainJob runs; why the command changed, if it did."""
    # Validation made sure the framework's container is there, by that name.
    found = next(ctr for ctr in pod["containers"] if ctr.get("name") == fw.info.default_container)
    found["name"] = c.NODE
    command = found.get("command")
    if not isinstance(command, list):
        return None
    found["command"], why = fw.trainjob_command(list(command))
    return f"{where}.command: {why}" if why else None


def _runtime(name: str, namespace: object, policy: str, nodes: int, job_spec: Json) -> Json:
    meta: Json = {"name": name, "labels": {"trainer.kubeflow.org/framework": policy}}
    if namespace:
        meta["namespace"] = namespace
    node = {
        "name": c.NODE,
        "template": {"metadata": {"labels": {c.LABEL_ANCESTOR: c.ANCESTOR_TRAINER}}, "spec": job_spec},
    }
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": meta,
        "spec": {
            "mlPolicy": {"numNodes": nodes, policy: {}},
            "template": {"spec": {"replicatedJobs": [node]}},
        },
    }


def _lost_env(fw: Framework, job: Json, train_job: Json, runtime: Json) -> list[str]:
    """The variables the v1 engine gives the job's framework container that the v2 node gets not (what
    the template sets itself is carried either way)."""
    job_meta = mapping(job.get("metadata"))
    namespace = job_meta.get("namespace") or "default"
    v1 = sync_v1(
        {**job, "metadata": {**job_meta, "uid": "migrate", "namespace": namespace}}, {}, Settings(), NOW
    )
    before = {
        str(e.get("name"))
        for pod in v1.children
        if pod.get("kind") == "Pod"
        for ctr in mapping(pod.get("spec")).get("containers") or []
        if ctr.get("name") == fw.info.default_container
        for e in ctr.get("env") or []
    }
    jobset = desired_jobset(
        {**train_job, "metadata": {**train_job["metadata"], "namespace": namespace}}, runtime
    )
    own = _env_names(runtime["spec"]["template"]["spec"]["replicatedJobs"])
    given = _env_names(jobset["spec"]["replicatedJobs"]) - own
    lost = sorted(before - own - given - fw.trainjob_launcher_env)
    if not lost:
        return []
    policy = POLICY_OF[fw.info.kind]
    return [
        f"env: the node no longer gets {', '.join(lost)} (Trainer's {policy} policy gives "
        f"{', '.join(sorted(given))}): a script that reads them must change"
    ]


def _env_names(replicated_jobs: list[Json]) -> set[str]:
    """The env names of the `node` containers of these replicatedJobs."""
    return {
        str(e.get("name"))
        for rjob in replicated_jobs
        for ctr in rjob["template"]["spec"]["template"]["spec"]["containers"]
        if ctr.get("name") == c.NODE
        for e in ctr.get("env") or []
    }
