"""Pointers into the repository's documents name sections that exist.

Comments cite facts as `docs/design.md#lagging-parent-cache`; a renamed heading would turn every such
pointer into a dead link without anything failing. Anchors are GitHub's: the heading lowercased, with
punctuation dropped and spaces turned into hyphens.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    "data",
}
# Generated from the Kubernetes OpenAPI document; their links point at kubernetes.io.
SKIP_PATHS = ("manifests/crds", "charts/trainop/crds", "trainop/install/schemas")
SUFFIXES = {".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".tpl", ".txt", ".json"}
# `docs/design.md#anchor`, `ARCHITECTURE.md#anchor`, `(design.md#anchor)` in a markdown link.
POINTER = re.compile(r"(?<![\w/.:-])((?:[\w.-]+/)*[\w.-]+\.md)#([\w-]+)")
SAME_FILE = re.compile(r"\]\(#([\w-]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def slug(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {slug(h) for h in HEADING.findall(text)}


def sources() -> list[Path]:
    out = []
    for top, dirs, files in os.walk(ROOT):
        here = Path(top)
        # Pruned, not filtered: a clone's .git and the virtualenvs hold most of the files on disk.
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIP_DIRS and not str((here / d).relative_to(ROOT)).startswith(SKIP_PATHS)
        ]
        out += [
            here / f for f in files if Path(f).suffix in SUFFIXES and here / f != Path(__file__).resolve()
        ]
    return out


def resolve(source: Path, target: str) -> Path:
    near = (source.parent / target).resolve()
    return near if near.is_file() else (ROOT / target).resolve()


def pointers() -> list[tuple[Path, Path, str]]:
    found = []
    for source in sources():
        text = source.read_text(errors="replace")
        found += [(source, resolve(source, m[1]), m[2]) for m in POINTER.finditer(text)]
        if source.suffix == ".md":
            found += [(source, source, m[1]) for m in SAME_FILE.finditer(text)]
    return found


def test_every_pointer_names_an_existing_document_and_section() -> None:
    found = pointers()
    # The design notes alone are cited from dozens of places; far fewer means the scan is broken.
    assert len([p for p in found if p[1].name == "design.md"]) >= 20
    cache: dict[Path, set[str]] = {}
    dead = []
    for source, doc, anchor in found:
        where = f"{source.relative_to(ROOT)} -> {doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc}"
        if not doc.is_file() or not doc.is_relative_to(ROOT):
            dead.append(f"{where}: no such document in the repository")
            continue
        if doc not in cache:
            cache[doc] = anchors(doc)
        if anchor not in cache[doc]:
            dead.append(f"{where}#{anchor}: no such section")
    assert not dead, "\n".join(sorted(set(dead)))


def test_slugs_follow_githubs_rules() -> None:
    assert slug("backoffLimit and activeDeadlineSeconds") == "backofflimit-and-activedeadlineseconds"
    assert slug("`trainop run`") == "trainop-run"
    assert slug("MPI ConfigMap and RBAC") == "mpi-configmap-and-rbac"
    assert slug("A hook cannot delete its parent") == "a-hook-cannot-delete-its-parent"
