"""The one table of accelerator device resources, and the checks on a pod's DRA resource claims.

Everything that counts devices (the MPI GPU launcher, PyTorch's nprocPerNode advice, accelerator
profiles) asks this table, so a vendor added here is counted everywhere at once. Kubeflow counts only
resource names containing "gpu", which misses MIG slices, Gaudi, Neuron and TPU
(docs/accelerators.md#device-resources).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from trainop.api import quantity
from trainop.api.checks import Result


@dataclass(frozen=True)
class Device:
    # The extended resource name, or a prefix ending in "-" for a family (MIG slices).
    resource: str
    vendor: str
    what: str
    # True when torchrun's nprocPerNode "auto"/"gpu" sees these devices (CUDA and ROCm builds of
    # PyTorch report them through torch.cuda); for the others it falls back to counting CPUs.
    torchrun_counts: bool

    def matches(self, name: str) -> bool:
        if self.resource.endswith("-"):
            return name.startswith(self.resource) and len(name) > len(self.resource)
        return name == self.resource


DEVICES: Final = (
    Device("nvidia.com/gpu", "NVIDIA", "a whole GPU", torchrun_counts=True),
    Device("nvidia.com/mig-", "NVIDIA", "a MIG slice (mixed strategy), e.g. nvidia.com/mig-1g.10gb", True),
    Device("amd.com/gpu", "AMD", "a GPU (ROCm)", torchrun_counts=True),
    Device("gpu.intel.com/i915", "Intel", "a GPU driven by i915", torchrun_counts=False),
    Device("gpu.intel.com/xe", "Intel", "a GPU driven by xe", torchrun_counts=False),
    Device("habana.ai/gaudi", "Intel Gaudi", "a Gaudi accelerator (HPU)", torchrun_counts=False),
    Device("aws.amazon.com/neuron", "AWS", "a Neuron device (Trainium, Inferentia)", torchrun_counts=False),
    Device("aws.amazon.com/neuroncore", "AWS", "a NeuronCore", torchrun_counts=False),
    Device("aws.amazon.com/neurondevice", "AWS", "a Neuron device (newer plugins)", torchrun_counts=False),
    Device("google.com/tpu", "Google", "a TPU chip", torchrun_counts=False),
)

# Kubeflow's own test for a GPU resource (its MPI controller), kept beside ours to say where they differ.
KUBEFLOW_GPU_SUFFIX: Final = ".com/gpu"
KUBEFLOW_GPU_PATTERN: Final = "gpu"


def device(name: str) -> Device | None:
    """The table's entry for a resource name, or None for cpu, memory and unknown extended resources."""
    return next((d for d in DEVICES if d.matches(name)), None)


def is_device(name: str) -> bool:
    """Whether a resource name is an accelerator: in the table, or one Kubeflow already counts as a GPU."""
    return device(name) is not None or name.endswith(KUBEFLOW_GPU_SUFFIX) or KUBEFLOW_GPU_PATTERN in name


def container_devices(container: Any) -> dict[str, Decimal]:
    """The accelerators a container asks for: its limits, or its requests where no limit is set (the
    apiserver copies an extended resource's request from its limit, and refuses one without a limit)."""
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return {}
    out: dict[str, Decimal] = {}
    for key in ("requests", "limits"):
        values = resources.get(key)
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            if not isinstance(name, str) or not is_device(name):
                continue
            try:
                out[name] = quantity.parse(value)
            except ValueError:
                continue
    return out


def pod_devices(containers: Iterable[Any]) -> dict[str, Decimal]:
    """The accelerators of a pod's containers, summed per resource name."""
    total: dict[str, Decimal] = {}
    for container in containers:
        for name, count in container_devices(container).items():
            total[name] = total.get(name, Decimal(0)) + count
    return total


# ---------------------------------------------------------------------------------------------- DRA
CLAIM_NAME: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
CLAIM_NAME_MAX: Final = 63


def check_resource_claims(pod_spec: Mapping[str, Any], path: str, result: Result) -> None:
    """Pod `resourceClaims` and the containers' `resources.claims` that use them, as the apiserver checks
    them on a pod: checked on the job so a mistake is refused at once instead of failing every pod."""
    claims = pod_spec.get("resourceClaims")
    names: set[str] = set()
    if isinstance(claims, list):
        for i, claim in enumerate(claims):
            where = f"{path}.resourceClaims[{i}]"
            if not isinstance(claim, dict):
                continue
            name = claim.get("name")
            if not isinstance(name, str) or not CLAIM_NAME.fullmatch(name) or len(name) > CLAIM_NAME_MAX:
                result.error(
                    f"{where}.name",
                    f"Invalid value: {name!r}: must be a DNS label (lowercase letters, digits and '-', "
                    f'at most {CLAIM_NAME_MAX} characters), e.g. "gpu"',
                )
                continue
            if name in names:
                result.error(f"{where}.name", f'Duplicate value: "{name}": give each claim its own name')
            names.add(name)
            sources = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(k)]
            if len(sources) != 1:
                result.error(
                    where,
                    "Invalid value: must set exactly one of resourceClaimName (a ResourceClaim shared by "
                    "every pod) or resourceClaimTemplateName (a claim per pod, the usual choice for a "
                    f"replica), found {len(sources)}",
                )
    for group in ("initContainers", "containers"):
        containers = pod_spec.get(group)
        if not isinstance(containers, list):
            continue
        for i, container in enumerate(containers):
            resources = container.get("resources") if isinstance(container, dict) else None
            used = resources.get("claims") if isinstance(resources, dict) else None
            if not isinstance(used, list):
                continue
            for j, ref in enumerate(used):
                name = ref.get("name") if isinstance(ref, dict) else None
                if name not in names:
                    known = ", ".join(f'"{n}"' for n in sorted(names)) or "none"
                    result.error(
                        f"{path}.{group}[{i}].resources.claims[{j}].name",
                        f"Invalid value: {name!r}: must name one of the pod's resourceClaims (declared: "
                        f"{known}); add it to {path}.resourceClaims",
                    )
