"""hack/gpu-check.sh on a machine where it cannot prove anything: with no NVIDIA GPU it says so and exits 2
(nothing to check, not a failure); with GPUs torch cannot use it fails (1) naming the fix, before any run.
The check itself needs real GPUs and is run by hand (docs/accelerators.md#checking-real-gpus)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "hack" / "gpu-check.sh"


def gpu_check(nvidia_smi: Path | str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT)],
        env={**os.environ, "NVIDIA_SMI": str(nvidia_smi), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def fake_nvidia_smi(tmp_path: Path, listing: str, code: int = 0) -> Path:
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\ncat <<'EOF'\n{listing}\nEOF\nexit {code}\n")
    tool.chmod(0o755)
    return tool


def test_without_nvidia_smi_it_exits_2_saying_there_is_no_gpu_to_check(tmp_path: Path) -> None:
    result = gpu_check(tmp_path / "nvidia-smi")
    assert result.returncode == 2
    assert "no NVIDIA GPU to check" in result.stderr and "is not installed" in result.stderr


def test_when_nvidia_smi_lists_no_gpu_it_exits_2(tmp_path: Path) -> None:
    result = gpu_check(fake_nvidia_smi(tmp_path, "No devices found."))
    assert result.returncode == 2
    assert "lists none" in result.stderr


def test_when_nvidia_smi_fails_it_exits_2_with_its_message(tmp_path: Path) -> None:
    failing = fake_nvidia_smi(tmp_path, "NVIDIA-SMI has failed because it couldn't communicate", code=9)
    result = gpu_check(failing)
    assert result.returncode == 2
    assert "NVIDIA-SMI has failed because it couldn't communicate" in result.stderr


def test_gpus_that_torch_cannot_use_fail_naming_the_fix_before_anything_runs(tmp_path: Path) -> None:
    listing = "GPU 0: NVIDIA L4 (UUID: GPU-0)\nGPU 1: NVIDIA L4 (UUID: GPU-1)"
    # A python3 whose torch cannot be imported: what a machine without a CUDA build of torch looks like.
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    python.chmod(0o755)
    result = gpu_check(fake_nvidia_smi(tmp_path, listing), PYTHON=str(python))
    assert result.returncode == 1
    assert "gpu-check: 2 GPU(s):" in result.stdout
    assert "FAILED: torch cannot use the GPUs nvidia-smi lists" in result.stderr
    assert "trainop run" not in result.stdout
