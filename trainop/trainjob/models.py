"""Pydantic models of Kubeflow Trainer's trainer.kubeflow.org/v1alpha1 API, with its JSON names.

As in the v1 models, Kubernetes' own types (env vars, resources, pod specs, the JobSet template) stay
plain JSON: the apiserver validates them against the CRD schema, and the engine passes them through.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainop.api.models import Model, optional


class RuntimeRef(Model):
    name: str = Field(description="Name of the TrainingRuntime or ClusterTrainingRuntime.")
    api_group: str | None = optional("API group of the runtime: trainer.kubeflow.org.", "apiGroup")
    kind: str | None = optional("ClusterTrainingRuntime (default) or TrainingRuntime.")


class InitializerSource(Model):
    storage_uri: str | None = optional("Where to fetch from, scheme://...", "storageUri")
    env: list[dict[str, Any]] | None = optional("Env vars for the initializer container.")
    secret_ref: dict[str, Any] | None = optional("Secret whose keys become env vars.", "secretRef")


class Initializer(Model):
    dataset: InitializerSource | None = optional("The dataset initializer's inputs.")
    model: InitializerSource | None = optional("The model initializer's inputs.")


class Trainer(Model):
    image: str | None = optional("Image of the trainer's node container.")
    command: list[str] | None = optional("Entrypoint of the node container.")
    args: list[str] | None = optional("Arguments of the node container.")
    env: list[dict[str, Any]] | None = optional("Env vars of the node container.")
    num_nodes: int | None = optional("Number of training nodes (pods).", "numNodes")
    resources_per_node: dict[str, Any] | None = optional(
        "Compute resources of each node's container.", "resourcesPerNode"
    )
    num_proc_per_node: int | None = optional("Processes per node.", "numProcPerNode")


class RuntimePatch(Model):
    manager: str = Field(description="Who owns this patch, a domain-prefixed path (kueue.x-k8s.io/manager).")
    time: str | None = optional("When the patch was last written.")
    training_runtime_spec: dict[str, Any] | None = optional(
        "The part of the runtime's spec to merge: template.metadata and template.spec.", "trainingRuntimeSpec"
    )


class TrainJobSpec(Model):
    runtime_ref: RuntimeRef = Field(alias="runtimeRef", description="The runtime to start from.")
    initializer: Initializer | None = optional("Dataset and model initializer inputs.")
    trainer: Trainer | None = optional("Overrides for the trainer step.")
    runtime_patches: list[RuntimePatch] | None = optional(
        "Patches to the runtime's template, merged in order.", "runtimePatches"
    )
    suspend: bool | None = optional("Suspend the job: the JobSet is suspended and its pods deleted.")
    active_deadline_seconds: int | None = optional(
        "Fail the job once it has run this long; resets on resume.", "activeDeadlineSeconds"
    )
    managed_by: str | None = optional(
        "trainer.kubeflow.org/trainjob-controller (default) or kueue.x-k8s.io/multikueue.", "managedBy"
    )


class EnvInjectionTarget(Model):
    job_name: str = Field(alias="jobName", description="A replicatedJob of the runtime.")
    container_names: list[str] = Field(alias="containerNames", description="Containers to give PET_* env.")


class EnvInjection(Model):
    targets: list[EnvInjectionTarget] | None = optional("More containers that get the torch env.")


class TorchPolicy(Model):
    env_injection: EnvInjection | None = optional("More containers that get the torch env.", "envInjection")


class MPIPolicy(Model):
    num_proc_per_node: int | None = optional("Slots per node in the hostfile.", "numProcPerNode")
    mpi_implementation: str | None = optional("OpenMPI.", "mpiImplementation")
    ssh_auth_mount_path: str | None = optional("Where the SSH Secret is mounted.", "sshAuthMountPath")
    run_launcher_as_node: bool | None = optional("The launcher also trains.", "runLauncherAsNode")


class FluxPolicy(Model):
    num_proc_per_node: int | None = optional("Processes per node.", "numProcPerNode")


class MLPolicy(Model):
    num_nodes: int | None = optional("Default number of training nodes.", "numNodes")
    torch: TorchPolicy | None = optional("PyTorch distributed (torchrun).")
    mpi: MPIPolicy | None = optional("MPI with a hostfile and SSH.")
    flux: FluxPolicy | None = optional("Flux Framework.")
    jax: dict[str, Any] | None = optional("JAX distributed.")
    xgboost: dict[str, Any] | None = optional("XGBoost's collective (Rabit).")


class TrainingRuntimeSpec(Model):
    ml_policy: MLPolicy | None = optional("The framework and its defaults.", "mlPolicy")
    pod_group_policy: dict[str, Any] | None = optional(
        "Gang scheduling: coscheduling or volcano.", "podGroupPolicy"
    )
    template: dict[str, Any] = Field(default_factory=dict, description="The JobSet template.")
