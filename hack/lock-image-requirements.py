"""Writes requirements.lock: what the project's image installs, every version pinned, every wheel hashed.

    python3 hack/lock-image-requirements.py            # rewrite requirements.lock
    python3 hack/lock-image-requirements.py --check    # exit 1 if the lock is not what would be written
    python3 hack/lock-image-requirements.py --image tensorboard [--check]
                                                       # tensorboard-image/requirements.lock instead

The versions are those installed here, where the test suite ran: the closure of pyproject.toml's runtime
dependencies and of its build requirement (the image builds the project without build isolation, so
setuptools is pinned too), with markers evaluated for Linux and Python 3.11 (the image's). The hashes are
those of the wheels `pip download` picks for the image's platforms (CPython 3.11 on glibc up to the
image's 2.36, x86_64 and aarch64); the image's pip then installs with --require-hashes, so a changed or
substituted file fails the build. --check downloads nothing: it compares the pins with the installed
versions, so a dependency upgraded here without a new lock fails `make check`.

The TensorBoard image's lock is the same, from the closure of tensorboard-image/requirements.in (the
versions installed here, where `trainop run --tensorboard` and its tests ran) instead of pyproject.toml's.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as metadata
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
TENSORBOARD = ROOT / "tensorboard-image"
MARKERS = {"extra": "", "python_version": "3.11", "sys_platform": "linux", "platform_system": "Linux",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}  # fmt: skip
GLIBC = range(17, 37)  # manylinux_2_17 .. manylinux_2_36: Debian bookworm's glibc is 2.36
ARCHES = ("x86_64", "aarch64")
HEADER = "# Written by hack/lock-image-requirements.py from the versions the tests ran with; do not edit.\n"


def project_roots() -> list[str]:
    """The project's runtime and build requirements."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [*project["project"]["dependencies"], *project["build-system"]["requires"]]


def file_roots(path: Path) -> list[str]:
    """The requirements of a requirements.in: one a line, `#` comments."""
    lines = (line.partition("#")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


IMAGES = ("trainop", "tensorboard")


def image_lock(image: str) -> tuple[list[str], Path]:
    """An image's top-level requirements and its lock (read when called: the tests move the locks)."""
    if image == "tensorboard":
        return file_roots(TENSORBOARD / "requirements.in"), TENSORBOARD / "requirements.lock"
    return project_roots(), LOCK


def pins(roots: list[str] | None = None) -> dict[str, str]:
    """name -> installed version, for the closure of `roots` (default: the project's requirements)."""
    todo = [Requirement(r) for r in (project_roots() if roots is None else roots)]
    out: dict[str, str] = {}
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in out or (req.marker is not None and not req.marker.evaluate(MARKERS)):
            continue
        dist = metadata.distribution(req.name)
        if not req.specifier.contains(dist.version, prereleases=True):
            sys.exit(f"{req.name} {dist.version} is installed, but {req} is required: install a matching one")
        out[name] = dist.version
        todo += [Requirement(r) for r in dist.requires or []]
    return dict(sorted(out.items()))


def wheel_hashes(name: str, version: str, arch: str) -> set[str]:
    """sha256 of the wheel pip picks for the image on ``arch`` (a pure-Python wheel on both)."""
    platforms = [a for n in reversed(GLIBC) for a in ("--platform", f"manylinux_2_{n}_{arch}")]
    with tempfile.TemporaryDirectory() as dest:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3",
             "--abi", "none", *platforms, "--platform", "any", "-d", dest, f"{name}=={version}"],
            check=True,
        )  # fmt: skip
        return {hashlib.sha256(p.read_bytes()).hexdigest() for p in Path(dest).glob("*.whl")}


def render(locked: dict[str, str], hashes: dict[str, set[str]]) -> str:
    lines = [HEADER]
    for name, version in locked.items():
        lines.append(
            f"{name}=={version} \\\n"
            + " \\\n".join(f"    --hash=sha256:{h}" for h in sorted(hashes[name]))
            + "\n"
        )
    return "".join(lines)


def locked_versions(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, _, version = line.split()[0].partition("==")
            out[name] = version
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare the lock with the installed versions")
    parser.add_argument("--image", choices=IMAGES, default="trainop", help="whose lock (default: trainop)")
    args = parser.parse_args()
    roots, lock = image_lock(args.image)
    shown = lock.relative_to(ROOT) if lock.is_relative_to(ROOT) else lock
    wanted = pins(roots)
    if args.check:
        have = locked_versions(lock.read_text()) if lock.exists() else {}
        if have != wanted:
            again = "" if args.image == "trainop" else f" --image {args.image}"
            print(f"{shown} is stale (locked {have}, installed {wanted}): run "
                  f"python3 hack/lock-image-requirements.py{again}", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    hashes = {
        name: {h for arch in ARCHES for h in wheel_hashes(name, version, arch)}
        for name, version in wanted.items()
    }
    lock.write_text(render(wanted, hashes))
    print(f"{shown}: {len(wanted)} packages, {sum(map(len, hashes.values()))} wheel hashes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
