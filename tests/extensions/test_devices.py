"""The device table, and the rules that count devices with it (MPI GPU launcher, PyTorch nprocPerNode)."""

from __future__ import annotations

import pytest

from tests.builders import container, job, replica, with_spec
from trainop.admission.admit import admit
from trainop.api import devices
from trainop.frameworks.mpi import MPI, MPIJOB
from trainop.job.context import JobContext
from trainop.job.settings import Settings

TABLE = [
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.10gb",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "aws.amazon.com/neurondevice",
    "google.com/tpu",
]


@pytest.mark.parametrize("name", TABLE)
def test_every_vendor_resource_is_in_the_device_table(name: str) -> None:
    assert devices.device(name) is not None


@pytest.mark.parametrize("name", ["cpu", "memory", "ephemeral-storage", "example.com/foo", "nvidia.com/mig-"])
def test_other_resources_are_not_devices(name: str) -> None:
    assert not devices.is_device(name)


def test_a_name_kubeflow_counts_as_a_gpu_is_still_a_device() -> None:
    assert devices.device("example.com/gpu") is None
    assert devices.is_device("example.com/gpu")


def test_pod_devices_sum_limits_of_every_container_and_requests_where_no_limit_is_set() -> None:
    containers = [
        container("a", resources={"limits": {"nvidia.com/gpu": "2", "cpu": "4"}}),
        container("b", resources={"requests": {"nvidia.com/gpu": 1}}),
    ]
    assert devices.pod_devices(containers) == {"nvidia.com/gpu": 3}


def gpu_launcher(resource: str) -> bool:
    launcher = replica("MPIJob", 1, [container("mpi", resources={"limits": {resource: 1}})])
    spec = job("MPIJob", Launcher=launcher, Worker=1)
    return MPI().gpu_launcher(JobContext(MPIJOB, admit(spec).job, Settings()))


@pytest.mark.parametrize("resource", TABLE)
def test_an_mpi_launcher_with_any_accelerator_is_a_gpu_launcher(resource: str) -> None:
    assert gpu_launcher(resource)


def test_an_mpi_launcher_with_cpu_only_is_not_a_gpu_launcher() -> None:
    assert not gpu_launcher("cpu")


def pytorch(nproc: str, resource: str, count: int = 4):
    worker = replica("PyTorchJob", 2, [container("pytorch", resources={"limits": {resource: count}})])
    return with_spec(job("PyTorchJob", Master=1, Worker=worker), nprocPerNode=nproc)


@pytest.mark.parametrize("resource", ["habana.ai/gaudi", "aws.amazon.com/neuroncore", "google.com/tpu"])
def test_nproc_auto_on_devices_torchrun_cannot_see_warns_with_the_count(resource: str) -> None:
    warnings = admit(pytorch("auto", resource)).checks.warnings

    assert warnings == [
        f"spec.pytorchReplicaSpecs[Worker]: its pods ask for 4 {resource}, which torchrun's nprocPerNode "
        '"auto" does not count (it sees CUDA devices only, so it means one process per CPU); set '
        'spec.nprocPerNode to "4" for one process per device'
    ]


def test_nproc_auto_on_nvidia_gpus_is_not_warned_about() -> None:
    assert admit(pytorch("auto", "nvidia.com/gpu")).checks.warnings == []


def test_nproc_gpu_without_any_cuda_device_warns() -> None:
    warnings = admit(with_spec(job("PyTorchJob", Master=1, Worker=1), nprocPerNode="gpu")).checks.warnings

    assert warnings == [
        'spec.nprocPerNode: "gpu" makes torchrun fail unless the pod sees a CUDA device, and no replica asks '
        'for one; request GPUs (e.g. trainop.dev/accelerator.Worker) or use "auto"'
    ]


def test_nproc_as_a_number_is_never_warned_about() -> None:
    assert admit(pytorch("4", "habana.ai/gaudi")).checks.warnings == []


# ---------------------------------------------------------------------------------------------- DRA
def claims_job(claims: list[dict], used: list[dict]) -> dict:
    worker = replica("PyTorchJob", 2, [container("pytorch", resources={"claims": used})])
    worker["template"]["spec"]["resourceClaims"] = claims
    return job("PyTorchJob", Master=1, Worker=worker)


WORKER = "spec.pytorchReplicaSpecs[Worker].template.spec"


def test_claims_from_a_template_used_by_the_container_are_admitted_and_passed_through() -> None:
    spec = claims_job([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpu"}])
    admission = admit(spec)

    assert admission.checks.ok
    assert admission.job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
    ]


def test_a_container_claim_that_names_no_pod_claim_is_refused() -> None:
    spec = claims_job([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], [{"name": "gpus"}])

    assert admit(spec).checks.message == (
        f"{WORKER}.containers[0].resources.claims[0].name: Invalid value: 'gpus': must name one of the pod's "
        f'resourceClaims (declared: "gpu"); add it to {WORKER}.resourceClaims'
    )


@pytest.mark.parametrize(
    "claim",
    [{"name": "gpu"}, {"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}],
)
def test_a_pod_claim_needs_exactly_one_source(claim: dict) -> None:
    message = admit(claims_job([claim], [])).checks.message

    assert message.startswith(f"{WORKER}.resourceClaims[0]: Invalid value: must set exactly one of ")


def test_pod_claim_names_are_unique_dns_labels() -> None:
    claims = [
        {"name": "gpu", "resourceClaimName": "a"},
        {"name": "gpu", "resourceClaimName": "b"},
        {"name": "GPU", "resourceClaimName": "c"},
    ]
    errors = [str(e) for e in admit(claims_job(claims, [])).checks.errors]

    assert errors == [
        f'{WORKER}.resourceClaims[1].name: Duplicate value: "gpu": give each claim its own name',
        f"{WORKER}.resourceClaims[2].name: Invalid value: 'GPU': must be a DNS label (lowercase letters, "
        "digits and '-', at most 63 characters), e.g. \"gpu\"",
    ]
