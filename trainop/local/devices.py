"""Accelerators under `trainop run`: this machine's devices, handed to local pods as a kubelet would.

A cluster's device plugin gives each pod exactly the devices its resources ask for and hides the rest;
kube-scheduler keeps a pod that cannot get them Pending. Locally the same is done with the vendors'
visibility variables (a process sees only the devices they list) and a per-run allocator:

* the inventory is detected from the machine (NVIDIA: `nvidia-smi -L`, else `/dev/nvidia<N>`; AMD and
  Intel: the DRM render nodes under /sys/class/drm with their PCI vendor and kernel driver), or read from
  TRAINOP_LOCAL_DEVICES (`nvidia.com/gpu=4,amd.com/gpu=2`), which replaces detection (tests, or a
  machine whose tools are missing);
* a pod gets whole devices of the resources it asks for (limits, else requests: trainop.api.devices),
  never one another pod of the run holds, unless the run shares devices (`--share-devices`);
* a pod that asks for more than is free stays Pending with kube-scheduler's kind of reason, and gets its
  devices once another pod releases them;
* a pod that asks for none of a vendor's devices gets that vendor's variables set to hide them all, as a
  pod without a GPU request sees no GPU on a cluster.

docs/accelerators.md#trainop-run lists the variables per vendor.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Final

from trainop.api import devices as table
from trainop.jsontypes import Json

INVENTORY_ENV: Final = "TRAINOP_LOCAL_DEVICES"
NVIDIA: Final = "nvidia.com/gpu"
AMD: Final = "amd.com/gpu"
INTEL_I915: Final = "gpu.intel.com/i915"
INTEL_XE: Final = "gpu.intel.com/xe"
# What each resource's devices are made visible with; the value is a comma-separated list of indices.
# A pod that asks for none of a resource gets the hiding value instead.
VISIBILITY: Final[Mapping[str, tuple[tuple[str, ...], str]]] = {
    NVIDIA: (("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"), ""),
    AMD: (("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"), ""),
    INTEL_I915: (("ZE_AFFINITY_MASK",), ""),
    INTEL_XE: (("ZE_AFFINITY_MASK",), ""),
    "habana.ai/gaudi": (("HABANA_VISIBLE_DEVICES",), ""),
    "aws.amazon.com/neuron": (("NEURON_RT_VISIBLE_CORES",), ""),
    "aws.amazon.com/neuroncore": (("NEURON_RT_VISIBLE_CORES",), ""),
    "google.com/tpu": (("TPU_VISIBLE_CHIPS",), ""),
}
_PCI_VENDORS: Final = {"0x1002": AMD, "0x8086": "intel"}
_INVENTORY_ENTRY: Final = re.compile(r"^(?P<resource>[a-z0-9.\-]+/[a-z0-9.\-]+)=(?P<count>[0-9]{1,4})$")


class InventoryError(ValueError):
    pass


@dataclass(frozen=True)
class Inventory:
    """How many devices of each resource this machine has (indices 0..n-1 per resource)."""

    counts: Mapping[str, int] = field(default_factory=dict)
    source: str = "detected"

    def describe(self) -> str:
        if not self.counts:
            return f"no accelerators ({self.source})"
        return ", ".join(f"{n} {name}" for name, n in sorted(self.counts.items())) + f" ({self.source})"


def parse_inventory(raw: str) -> Inventory:
    counts: dict[str, int] = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        match = _INVENTORY_ENTRY.fullmatch(entry)
        if match is None:
            raise InventoryError(
                f"{INVENTORY_ENV}: {entry!r} is not <resource>=<count>, e.g. nvidia.com/gpu=4"
            )
        resource = match["resource"]
        if table.device(resource) is None:
            known = ", ".join(d.resource for d in table.DEVICES)
            raise InventoryError(f"{INVENTORY_ENV}: {resource!r} is not a device resource ({known})")
        counts[resource] = int(match["count"])
    return Inventory(counts, source=INVENTORY_ENV)


Runner = Callable[[list[str]], str]


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def detect(env: Mapping[str, str] = os.environ, root: Path = Path("/"), run: Runner = _run) -> Inventory:
    """The machine's devices: TRAINOP_LOCAL_DEVICES if set, else what the vendors' tools and /sys show."""
    raw = env.get(INVENTORY_ENV)
    if raw is not None:
        return parse_inventory(raw)
    counts: dict[str, int] = {}
    nvidia = sum(1 for line in run(["nvidia-smi", "-L"]).splitlines() if line.startswith("GPU "))
    if not nvidia:
        nvidia = sum(1 for p in (root / "dev").glob("nvidia*") if re.fullmatch(r"nvidia[0-9]+", p.name))
    if nvidia:
        counts[NVIDIA] = nvidia
    for resource in _render_nodes(root):
        counts[resource] = counts.get(resource, 0) + 1
    return Inventory(counts)


def _render_nodes(root: Path) -> Iterable[str]:
    for node in sorted((root / "sys" / "class" / "drm").glob("renderD*")):
        device = node / "device"
        try:
            vendor = (device / "vendor").read_text().strip()
            driver = (device / "driver").resolve().name
        except OSError:
            continue
        kind = _PCI_VENDORS.get(vendor)
        if kind == AMD:
            yield AMD
        elif kind == "intel" and driver in ("i915", "xe"):
            yield INTEL_I915 if driver == "i915" else INTEL_XE


def requested(pod: Json) -> dict[str, int]:
    """Whole devices per resource the pod's containers ask for (init containers run before, so the
    pod needs the larger of its largest init container and the sum of its containers, as a kubelet)."""
    spec = pod.get("spec") or {}
    total = table.pod_devices(spec.get("containers") or [])
    for init in spec.get("initContainers") or []:
        for name, count in table.container_devices(init).items():
            total[name] = max(total.get(name, Decimal(0)), count)
    return {name: int(count) for name, count in total.items() if count > 0}


@dataclass
class Allocator:
    """Which pod of the run holds which device indices."""

    inventory: Inventory
    share: bool = False
    held: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # pod -> resource -> indices

    def allocate(self, pod_name: str, wants: Mapping[str, int]) -> dict[str, list[int]] | str:
        """The devices for a pod, now held by it, or why it must stay Pending (nothing is held then)."""
        if pod_name in self.held:
            return self.held[pod_name]
        short: list[str] = []
        chosen: dict[str, list[int]] = {}
        for resource, count in sorted(wants.items()):
            have = self.inventory.counts.get(resource, 0)
            busy = set() if self.share else self._busy(resource)
            free = [i for i in range(have) if i not in busy]
            if len(free) < count:
                short.append(
                    f"Insufficient {resource} (asks for {count}; this machine has {have}, "
                    f"{have - len(free)} held by other pods of the run)"
                )
                continue
            chosen[resource] = free[:count]
        if short:
            return f"0/1 nodes are available: {'; '.join(short)}"
        self.held[pod_name] = chosen
        return chosen

    def release(self, pod_name: str) -> None:
        self.held.pop(pod_name, None)

    def _busy(self, resource: str) -> set[int]:
        return {i for holds in self.held.values() for i in holds.get(resource, [])}


def visibility_env(inventory: Inventory, granted: Mapping[str, list[int]]) -> dict[str, str]:
    """The variables for a pod granted `granted`: its devices for what it holds, hidden for the rest."""
    out: dict[str, str] = {}
    for resource in sorted(set(inventory.counts) | set(granted)):
        names, hidden = VISIBILITY.get(resource, ((), ""))
        value = ",".join(str(i) for i in granted[resource]) if resource in granted else hidden
        for name in names:
            # Two resources sharing a variable (Intel's i915 and xe): what a pod holds wins over hiding.
            if resource in granted or name not in out:
                out[name] = value
    return out


def with_env(pod: Json, env: Mapping[str, str]) -> Json:
    """The pod with `env` set in every container and init container (copied; the rest shared)."""
    if not env:
        return pod
    spec = dict(pod.get("spec") or {})
    for group in ("initContainers", "containers"):
        containers = spec.get(group)
        if not isinstance(containers, list):
            continue
        updated = []
        for container in containers:
            own = [e for e in container.get("env") or [] if e.get("name") not in env]
            added = [{"name": k, "value": v} for k, v in sorted(env.items())]
            updated.append({**container, "env": own + added})
        spec[group] = updated
    return {**pod, "spec": spec}
