"""Accelerators under `trainop run`: the inventory, who gets which device, and who waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainop.local.devices import (
    AMD,
    INTEL_XE,
    NVIDIA,
    Allocator,
    Inventory,
    InventoryError,
    detect,
    parse_inventory,
    requested,
    visibility_env,
    with_env,
)

FOUR_GPUS = Inventory({NVIDIA: 4}, source="test")


def pod(gpus: int | None = None, init_gpus: int | None = None) -> dict[str, Any]:
    def container(name: str, count: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "image": "x"}
        if count is not None:
            out["resources"] = {"limits": {NVIDIA: str(count), "cpu": "1"}}
        return out

    spec: dict[str, Any] = {"containers": [container("main", gpus)]}
    if init_gpus is not None:
        spec["initContainers"] = [container("init", init_gpus)]
    return {"metadata": {"name": "p"}, "spec": spec}


class TestInventory:
    def test_the_setting_replaces_detection(self) -> None:
        inventory = detect({"TRAINOP_LOCAL_DEVICES": "nvidia.com/gpu=4, amd.com/gpu=2"}, run=_no_tools)
        assert inventory.counts == {NVIDIA: 4, AMD: 2}

    @pytest.mark.parametrize("raw", ["nvidia.com/gpu", "nvidia.com/gpu=four", "example.com/widget=1"])
    def test_a_bad_setting_is_refused_naming_the_entry(self, raw: str) -> None:
        with pytest.raises(InventoryError, match="TRAINOP_LOCAL_DEVICES"):
            parse_inventory(raw)

    def test_nvidia_gpus_are_counted_from_nvidia_smi(self, tmp_path: Path) -> None:
        listing = "GPU 0: NVIDIA A100 (UUID: GPU-1)\nGPU 1: NVIDIA A100 (UUID: GPU-2)\n"
        inventory = detect({}, root=tmp_path, run=lambda argv: listing if argv[0] == "nvidia-smi" else "")
        assert inventory.counts == {NVIDIA: 2}

    def test_nvidia_device_files_count_without_the_tool(self, tmp_path: Path) -> None:
        (tmp_path / "dev").mkdir()
        for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
            (tmp_path / "dev" / name).touch()
        assert detect({}, root=tmp_path, run=_no_tools).counts == {NVIDIA: 2}

    def test_amd_and_intel_render_nodes_are_told_apart_by_vendor_and_driver(self, tmp_path: Path) -> None:
        _render_node(tmp_path, "renderD128", "0x1002", "amdgpu")
        _render_node(tmp_path, "renderD129", "0x8086", "xe")
        _render_node(tmp_path, "renderD130", "0x1af4", "virtio-pci")
        assert detect({}, root=tmp_path, run=_no_tools).counts == {AMD: 1, INTEL_XE: 1}

    def test_a_machine_without_devices_has_an_empty_inventory(self, tmp_path: Path) -> None:
        assert detect({}, root=tmp_path, run=_no_tools).counts == {}


class TestRequests:
    def test_limits_of_the_containers_count(self) -> None:
        assert requested(pod(gpus=2)) == {NVIDIA: 2}

    def test_a_pod_without_devices_asks_for_none(self) -> None:
        assert requested(pod()) == {}

    def test_an_init_container_needs_its_own_devices_at_most(self) -> None:
        assert requested(pod(gpus=1, init_gpus=3)) == {NVIDIA: 3}


class TestAllocation:
    def test_four_pods_of_one_device_get_four_distinct_devices(self) -> None:
        allocator = Allocator(FOUR_GPUS)
        grants = [allocator.allocate(f"p{i}", {NVIDIA: 1}) for i in range(4)]
        assert sorted(g[NVIDIA][0] for g in grants if isinstance(g, dict)) == [0, 1, 2, 3]

    def test_a_fifth_device_stays_pending_with_the_reason(self) -> None:
        allocator = Allocator(FOUR_GPUS)
        for i in range(4):
            allocator.allocate(f"p{i}", {NVIDIA: 1})
        reason = allocator.allocate("p4", {NVIDIA: 1})
        assert reason == (
            "0/1 nodes are available: Insufficient nvidia.com/gpu "
            "(asks for 1; this machine has 4, 4 held by other pods of the run)"
        )

    def test_a_released_device_goes_to_the_waiting_pod(self) -> None:
        allocator = Allocator(FOUR_GPUS)
        for i in range(4):
            allocator.allocate(f"p{i}", {NVIDIA: 1})
        allocator.release("p2")
        assert allocator.allocate("p4", {NVIDIA: 1}) == {NVIDIA: [2]}

    def test_a_pod_that_must_wait_holds_nothing(self) -> None:
        allocator = Allocator(Inventory({NVIDIA: 1, AMD: 1}))
        assert isinstance(allocator.allocate("big", {NVIDIA: 1, AMD: 2}), str)
        assert allocator.allocate("small", {NVIDIA: 1}) == {NVIDIA: [0]}

    def test_asking_twice_gives_the_same_devices(self) -> None:
        allocator = Allocator(FOUR_GPUS)
        first = allocator.allocate("p", {NVIDIA: 2})
        assert allocator.allocate("p", {NVIDIA: 2}) == first

    def test_shared_devices_are_handed_out_again(self) -> None:
        allocator = Allocator(Inventory({NVIDIA: 1}), share=True)
        assert allocator.allocate("a", {NVIDIA: 1}) == allocator.allocate("b", {NVIDIA: 1}) == {NVIDIA: [0]}


class TestVisibility:
    def test_a_pod_sees_exactly_its_devices(self) -> None:
        env = visibility_env(FOUR_GPUS, {NVIDIA: [1, 3]})
        assert env == {"CUDA_VISIBLE_DEVICES": "1,3", "NVIDIA_VISIBLE_DEVICES": "1,3"}

    def test_a_pod_without_devices_sees_none_of_the_machines(self) -> None:
        env = visibility_env(Inventory({NVIDIA: 4, AMD: 1}), {})
        assert env == {
            "CUDA_VISIBLE_DEVICES": "",
            "NVIDIA_VISIBLE_DEVICES": "",
            "HIP_VISIBLE_DEVICES": "",
            "ROCR_VISIBLE_DEVICES": "",
        }

    def test_the_variables_reach_every_container_and_win_over_the_templates(self) -> None:
        p = pod(gpus=1, init_gpus=0)
        p["spec"]["containers"][0]["env"] = [
            {"name": "CUDA_VISIBLE_DEVICES", "value": "7"},
            {"name": "A", "value": "b"},
        ]
        out = with_env(p, {"CUDA_VISIBLE_DEVICES": "2"})
        assert out["spec"]["containers"][0]["env"] == [
            {"name": "A", "value": "b"},
            {"name": "CUDA_VISIBLE_DEVICES", "value": "2"},
        ]
        assert out["spec"]["initContainers"][0]["env"] == [{"name": "CUDA_VISIBLE_DEVICES", "value": "2"}]
        assert p["spec"]["containers"][0]["env"][0]["value"] == "7"


def _no_tools(argv: list[str]) -> str:
    return ""


def _render_node(root: Path, name: str, vendor: str, driver: str) -> None:
    device = root / "sys" / "class" / "drm" / name / "device"
    device.mkdir(parents=True)
    (device / "vendor").write_text(vendor + "\n")
    target = root / "sys" / "bus" / "pci" / "drivers" / driver
    target.mkdir(parents=True, exist_ok=True)
    (device / "driver").symlink_to(target)
