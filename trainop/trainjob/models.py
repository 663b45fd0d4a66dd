"""Pydantic models of Kubeflow Trainer's trainer.kubeflow.org/v1alpha1 API, with its JSON names.

As in the v1 models, Kubernetes' own types (env vars, resources, pod specs, the JobSet template) stay
plain JSON: the apiserver validates them against the CRD schema, and the engine passes them through.
The CRD facts a model cannot state as a Python type (lengths, defaults, CEL rules, list types, and
which Kubernetes or JobSet type a JSON field holds) ride along as `crd=` (trainop.install.trainer_crds
reads them; pydantic's own validation ignores them, so the engine reads what the apiserver stored).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainop.api.models import Model
from trainop.jsontypes import Json

IMMUTABLE: Json = {"x-kubernetes-validations": [{"message": "field is immutable", "rule": "self == oldSelf"}]}
NAME_253: Json = {"maxLength": 253, "minLength": 1}
INT32: Json = {"format": "int32"}


def optional(description: str, alias: str | None = None, crd: Json | None = None) -> Any:
    """An optional field; `crd`, the CRD facts of its schema node (trainop.install.trainer_crds)."""
    return Field(default=None, description=description, alias=alias, json_schema_extra=crd)


def required(description: str, alias: str | None = None, crd: Json | None = None) -> Any:
    return Field(description=description, alias=alias, json_schema_extra=crd)


def kube(path: str, **facts: Any) -> Json:
    """A field of a Kubernetes or JobSet type: its schema is JobSet's CRD's at `path` (dotted, under the
    JobSet spec; `items` steps into a list), with `facts` on top."""
    return {"trainop:kube": path, **facts}


def model(name: str) -> Json:
    """A JSON field whose schema is the model `name` of this module (the engine merges it as JSON)."""
    return {"trainop:model": name}


POD = "replicatedJobs.items.template.spec.template.spec"
CONTAINER = f"{POD}.containers.items"
META = "replicatedJobs.items.template.metadata"
ENV_LIST: Json = kube(f"{CONTAINER}.env", maxItems=128)


class RuntimeRef(Model):
    name: str = required("Name of the TrainingRuntime or ClusterTrainingRuntime.", crd=NAME_253)
    api_group: str | None = optional(
        "API group of the runtime: trainer.kubeflow.org.",
        "apiGroup",
        {"default": "trainer.kubeflow.org", "maxLength": 253},
    )
    kind: str | None = optional(
        "ClusterTrainingRuntime (default) or TrainingRuntime.",
        crd={"default": "ClusterTrainingRuntime", "maxLength": 253},
    )


URI_RULE: Json = {
    "x-kubernetes-validations": [
        {
            "message": "storageUri may be empty, or it must be a valid URI (scheme://...)",
            "rule": "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
        }
    ]
}


class InitializerSource(Model):
    storage_uri: str | None = optional(
        "Where to fetch from, scheme://...", "storageUri", {"maxLength": 2048, **URI_RULE}
    )
    env: list[dict[str, Any]] | None = optional("Env vars for the initializer container.", crd=ENV_LIST)
    secret_ref: dict[str, Any] | None = optional(
        "Secret whose keys become env vars.", "secretRef", kube(f"{POD}.imagePullSecrets.items")
    )


class Initializer(Model):
    dataset: InitializerSource | None = optional("The dataset initializer's inputs.")
    model: InitializerSource | None = optional("The model initializer's inputs.")


STRINGS_128: Json = {
    "maxItems": 128,
    "x-kubernetes-list-type": "atomic",
    "trainop:items": {"maxLength": 1048576},
}


class Trainer(Model):
    image: str | None = optional("Image of the trainer's node container.", crd={"maxLength": 500})
    command: list[str] | None = optional("Entrypoint of the node container.", crd=STRINGS_128)
    args: list[str] | None = optional("Arguments of the node container.", crd=STRINGS_128)
    env: list[dict[str, Any]] | None = optional("Env vars of the node container.", crd=ENV_LIST)
    num_nodes: int | None = optional("Number of training nodes (pods).", "numNodes", INT32)
    resources_per_node: dict[str, Any] | None = optional(
        "Compute resources of each node's container.", "resourcesPerNode", kube(f"{CONTAINER}.resources")
    )
    num_proc_per_node: int | None = optional("Processes per node.", "numProcPerNode", INT32)


class RuntimePatch(Model):
    manager: str = required(
        "Who owns this patch, a domain-prefixed path (kueue.x-k8s.io/manager).", crd={**NAME_253, **IMMUTABLE}
    )
    time: str | None = optional("When the patch was last written.", crd={"format": "date-time"})
    training_runtime_spec: dict[str, Any] | None = optional(
        "The part of the runtime's spec to merge: template.metadata and template.spec.",
        "trainingRuntimeSpec",
        model("TrainingRuntimeSpecPatch"),
    )


MANAGERS = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")


class TrainJobSpec(Model):
    runtime_ref: RuntimeRef = required("The runtime to start from.", "runtimeRef", IMMUTABLE)
    initializer: Initializer | None = optional("Dataset and model initializer inputs.", crd=IMMUTABLE)
    trainer: Trainer | None = optional("Overrides for the trainer step.", crd=IMMUTABLE)
    runtime_patches: list[RuntimePatch] | None = optional(
        "Patches to the runtime's template, merged in order.",
        "runtimePatches",
        {"maxItems": 16, "x-kubernetes-list-map-keys": ["manager"], "x-kubernetes-list-type": "map"},
    )
    suspend: bool | None = optional(
        "Suspend the job: the JobSet is suspended and its pods deleted.", crd={"default": False}
    )
    active_deadline_seconds: int | None = optional(
        "Fail the job once it has run this long; resets on resume.",
        "activeDeadlineSeconds",
        {"format": "int64", "minimum": 1, **IMMUTABLE},
    )
    managed_by: str | None = optional(
        "trainer.kubeflow.org/trainjob-controller (default) or kueue.x-k8s.io/multikueue.",
        "managedBy",
        {
            "default": MANAGERS[0],
            "maxLength": 253,
            "x-kubernetes-validations": [
                {
                    "message": f"ManagedBy must be {MANAGERS[0]} or {MANAGERS[1]} if set",
                    "rule": f"self in {list(MANAGERS)}",
                },
                IMMUTABLE["x-kubernetes-validations"][0],
            ],
        },
    )


# ---- what a runtime patch may change (the engine merges it as JSON; these give its CRD schema) --------


class ObjectMetaPatch(Model):
    labels: dict[str, str] | None = optional("Labels to add.")
    annotations: dict[str, str] | None = optional("Annotations to add.")


class ContainerPatch(Model):
    name: str = required("The container of the runtime to patch.", crd=NAME_253)
    env: list[dict[str, Any]] | None = optional("Env vars to add or replace, by name.", crd=ENV_LIST)
    volume_mounts: list[dict[str, Any]] | None = optional(
        "Volume mounts to add.",
        "volumeMounts",
        kube(f"{CONTAINER}.volumeMounts", maxItems=128, **{"x-kubernetes-list-map-keys": ["name"]}),
    )
    security_context: dict[str, Any] | None = optional(
        "The container's security context.", "securityContext", kube(f"{CONTAINER}.securityContext")
    )


def _containers(description: str, alias: str | None = None) -> Any:
    facts = {
        "maxItems": 64,
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-list-type": "map",
        **IMMUTABLE,
    }
    return optional(description, alias, facts)


class PodSpecPatch(Model):
    affinity: dict[str, Any] | None = optional("Scheduling affinity.", crd=kube(f"{POD}.affinity"))
    containers: list[ContainerPatch] | None = _containers("Patches of the runtime's containers.")
    init_containers: list[ContainerPatch] | None = _containers(
        "Patches of the runtime's init containers.", "initContainers"
    )
    image_pull_secrets: list[dict[str, Any]] | None = optional(
        "Secrets to pull images with.",
        "imagePullSecrets",
        kube(f"{POD}.imagePullSecrets", maxItems=64, **IMMUTABLE),
    )
    node_selector: dict[str, str] | None = optional("Node labels the pods must match.", "nodeSelector")
    scheduling_gates: list[dict[str, Any]] | None = optional(
        "Gates that hold the pods from scheduling.",
        "schedulingGates",
        kube(f"{POD}.schedulingGates", maxItems=16),
    )
    security_context: dict[str, Any] | None = optional(
        "The pods' security context.", "securityContext", kube(f"{POD}.securityContext", **IMMUTABLE)
    )
    service_account_name: str | None = optional(
        "The pods' service account.", "serviceAccountName", {"maxLength": 253, **IMMUTABLE}
    )
    termination_grace_period_seconds: int | None = optional(
        "Seconds a pod gets to stop.",
        "terminationGracePeriodSeconds",
        {"format": "int64", "minimum": 0, **IMMUTABLE},
    )
    tolerations: list[dict[str, Any]] | None = optional(
        "Taints the pods tolerate.", crd=kube(f"{POD}.tolerations", maxItems=128)
    )
    volumes: list[dict[str, Any]] | None = optional(
        "Volumes to add.", crd=kube(f"{POD}.volumes", maxItems=128, **IMMUTABLE)
    )


class PodTemplatePatch(Model):
    metadata: ObjectMetaPatch | None = optional("Labels and annotations of the pods.", crd=kube(META))
    spec: PodSpecPatch | None = optional("The pod spec's patch.")


class JobSpecPatch(Model):
    template: PodTemplatePatch | None = optional("The pod template's patch.")


class JobTemplatePatch(Model):
    metadata: ObjectMetaPatch | None = optional("Labels and annotations of the Job.", crd=kube(META))
    spec: JobSpecPatch | None = optional("The Job spec's patch.")


class ReplicatedJobPatch(Model):
    name: str = required("The replicatedJob of the runtime to patch.", crd=NAME_253)
    template: JobTemplatePatch | None = optional("The Job template's patch.")


class JobSetSpecPatch(Model):
    replicated_jobs: list[ReplicatedJobPatch] | None = optional(
        "Patches of the runtime's replicatedJobs, by name.",
        "replicatedJobs",
        {"maxItems": 100, "x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map"},
    )


class JobSetTemplatePatch(Model):
    metadata: ObjectMetaPatch | None = optional("Labels and annotations of the JobSet.", crd=kube(META))
    spec: JobSetSpecPatch | None = optional("The JobSet spec's patch.")


class TrainingRuntimeSpecPatch(Model):
    template: JobSetTemplatePatch | None = optional("The JobSet template's patch.")


# ---- runtimes --------------------------------------------------------------------------------------


class EnvInjectionTarget(Model):
    job_name: str = required("A replicatedJob of the runtime.", "jobName", NAME_253)
    container_names: list[str] = required(
        "Containers to give PET_* env.",
        "containerNames",
        {
            "maxItems": 8,
            "minItems": 1,
            "x-kubernetes-list-type": "set",
            "trainop:items": {"maxLength": 63},
            "x-kubernetes-validations": [
                {
                    "message": "containerNames must not include the main node container because PET_* "
                    "envs are always injected into it",
                    "rule": "!self.exists(c, c == 'node')",
                }
            ],
        },
    )


class EnvInjection(Model):
    targets: list[EnvInjectionTarget] | None = optional(
        "More containers that get the torch env.",
        crd={"maxItems": 16, "x-kubernetes-list-map-keys": ["jobName"], "x-kubernetes-list-type": "map"},
    )


class TorchPolicy(Model):
    env_injection: EnvInjection | None = optional("More containers that get the torch env.", "envInjection")


class MPIPolicy(Model):
    num_proc_per_node: int | None = optional(
        "Slots per node in the hostfile.", "numProcPerNode", {"default": 1, **INT32}
    )
    mpi_implementation: str | None = optional(
        "OpenMPI.", "mpiImplementation", {"default": "OpenMPI", "enum": ["OpenMPI", ""]}
    )
    ssh_auth_mount_path: str | None = optional(
        "Where the SSH Secret is mounted.", "sshAuthMountPath", {"default": "/root/.ssh", "maxLength": 4096}
    )
    run_launcher_as_node: bool | None = optional(
        "The launcher also trains.", "runLauncherAsNode", {"default": False}
    )


class FluxPolicy(Model):
    num_proc_per_node: int | None = optional(
        "Processes per node.",
        "numProcPerNode",
        {
            "default": 1,
            **INT32,
            "x-kubernetes-validations": [
                {"message": "NumProcPerNode in fluxPolicy must be >= 1", "rule": "self >= 1"}
            ],
        },
    )


ONE_POLICY: Json = {
    "x-kubernetes-validations": [
        {
            "message": "Only one of the policy can be configured",
            "rule": "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)]"
            ".filter(x, x).size() <= 1",
        }
    ]
}


class MLPolicy(Model):
    num_nodes: int | None = optional("Default number of training nodes.", "numNodes", INT32)
    torch: TorchPolicy | None = optional("PyTorch distributed (torchrun).")
    mpi: MPIPolicy | None = optional("MPI with a hostfile and SSH.")
    flux: FluxPolicy | None = optional("Flux Framework.")
    jax: dict[str, Any] | None = optional("JAX distributed.", crd={"trainop:empty": True})
    xgboost: dict[str, Any] | None = optional("XGBoost's collective (Rabit).", crd={"trainop:empty": True})


class Coscheduling(Model):
    schedule_timeout_seconds: int | None = optional(
        "Seconds the gang may wait to be scheduled.", "scheduleTimeoutSeconds", {"default": 60, **INT32}
    )


class NetworkTopology(Model):
    mode: str | None = optional("hard or soft.", crd={"default": "hard", "enum": ["hard", "soft"]})
    highest_tier_allowed: int | None = optional(
        "The highest network tier the gang may span.", "highestTierAllowed", {"default": 1}
    )


class Volcano(Model):
    network_topology: NetworkTopology | None = optional("Volcano's network topology.", "networkTopology")


class PodGroupPolicy(Model):
    coscheduling: Coscheduling | None = optional("scheduler-plugins' coscheduling.")
    volcano: Volcano | None = optional("Volcano's gang scheduling.")


class JobSetTemplate(Model):
    metadata: dict[str, Any] | None = optional("Labels and annotations of the JobSet.", crd=kube(META))
    spec: dict[str, Any] | None = optional("The JobSet spec.", crd={"trainop:kube": ""})


class TrainingRuntimeSpec(Model):
    ml_policy: MLPolicy | None = optional("The framework and its defaults.", "mlPolicy", ONE_POLICY)
    pod_group_policy: dict[str, Any] | None = optional(
        "Gang scheduling: coscheduling or volcano.", "podGroupPolicy", model("PodGroupPolicy")
    )
    template: dict[str, Any] = Field(
        default_factory=dict,
        description="The JobSet template.",
        json_schema_extra={**model("JobSetTemplate"), "minProperties": 1},
    )


# ---- status ----------------------------------------------------------------------------------------


class Condition(Model):
    type: str = required(
        "The condition's type: Complete, Failed or Suspended.",
        crd={
            "maxLength": 316,
            "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        },
    )
    status: str = required("True, False or Unknown.", crd={"enum": ["True", "False", "Unknown"]})
    observed_generation: int | None = optional(
        "The generation the condition was set from.", "observedGeneration", {"format": "int64", "minimum": 0}
    )
    last_transition_time: str = required(
        "When the status last changed.", "lastTransitionTime", {"format": "date-time"}
    )
    reason: str = required(
        "Why, in CamelCase.",
        crd={"maxLength": 1024, "minLength": 1, "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
    )
    message: str = required("Why, for people.", crd={"maxLength": 32768})


COUNT: Json = {"format": "int32", "minimum": 0}


class JobStatus(Model):
    name: str = required("The replicatedJob.", crd=NAME_253)
    ready: int = required("Jobs with ready pods.", crd=COUNT)
    succeeded: int = required("Jobs that succeeded.", crd=COUNT)
    failed: int = required("Jobs that failed.", crd=COUNT)
    active: int = required("Jobs running.", crd=COUNT)
    suspended: int = required("Jobs suspended.", crd=COUNT)


class Metric(Model):
    name: str = required("The metric's name.", crd={"maxLength": 64, "minLength": 1})
    value: str = required("Its value.", crd={"maxLength": 64, "minLength": 1})


class TrainerStatus(Model):
    progress_percentage: int | None = optional(
        "How far the training is.", "progressPercentage", {"format": "int32", "maximum": 100, "minimum": 0}
    )
    estimated_remaining_seconds: int | None = optional(
        "Seconds the training is expected to take still.", "estimatedRemainingSeconds", COUNT
    )
    metrics: list[Metric] | None = optional(
        "The trainer's latest metrics.", crd={"maxItems": 256, "x-kubernetes-list-type": "atomic"}
    )
    last_updated_time: str | None = optional(
        "When the trainer last reported.", "lastUpdatedTime", {"format": "date-time"}
    )


class TrainJobStatus(Model):
    conditions: list[Condition] | None = optional(
        "Complete, Failed, Suspended.",
        crd={"maxItems": 8, "x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map"},
    )
    jobs_status: list[JobStatus] | None = optional(
        "Per replicatedJob, its Jobs' counts.",
        "jobsStatus",
        {"maxItems": 100, "x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map"},
    )
    trainer_status: TrainerStatus | None = optional(
        "Progress the trainer reports.",
        "trainerStatus",
        {
            "x-kubernetes-validations": [
                {
                    "message": "lastUpdatedTime is required when trainerStatus is present",
                    "rule": "has(self.lastUpdatedTime)",
                }
            ]
        },
    )
