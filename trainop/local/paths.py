"""Every file `trainop run` itself writes for a job lives in the run folder, whatever the job's fields say.

The names come from the job (volume and container names, ConfigMap item paths, subPaths). They are
validated as the apiserver would before the run starts (trainop.local.podspec); this is the second wall,
at the moment of writing: the path is resolved, symlinks included, and refused unless it stays inside.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from trainop.local.errors import NotRunnableLocally


def inside(root: Path, *parts: str, field: str) -> Path:
    """`root` joined with `parts`, resolved; NotRunnableLocally naming `field` if that leaves `root`."""
    base = root.resolve()
    target = base.joinpath(*parts).resolve()
    if not target.is_relative_to(base):
        raise NotRunnableLocally(
            field,
            f"{'/'.join(parts)!r} resolves to {target}, outside {base}: trainop run writes only inside the "
            "run folder; use a relative path without '..' and no symlink leading out",
        )
    return target


def write_file(path: Path, data: str, mode: int) -> None:
    """Replace `path` with `data` without following a symlink planted at it or at its temporary name."""
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data.encode())
        os.fchmod(f.fileno(), mode)
    # A rename replaces the directory entry, so a symlink at `path` is replaced, never written through.
    os.replace(tmp, path)


def open_log(path: Path) -> int:
    """A log file opened for appending (created 0644), refusing to follow a symlink planted in its place."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
