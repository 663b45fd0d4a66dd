"""Each framework's rules live in its module under trainop/frameworks/: generic code names no kind.

A kind name or a replica type written literally outside those modules is a rule of that framework
spread elsewhere; adding or changing a kind would then mean finding it. Generic code asks the
registry (trainop.frameworks) and the kind's facts (KindInfo) instead.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from trainop.frameworks import KINDS

REPO = Path(__file__).resolve().parents[2]
PRODUCTION = ("trainop", "hooks", "webhooks")
FRAMEWORKS = REPO / "trainop" / "frameworks"
NAMES = frozenset(KINDS) | frozenset(t for info in KINDS.values() for t in info.replica_types)
WORD = re.compile(r"\b(" + "|".join(sorted(NAMES, key=len, reverse=True)) + r")\b")


def production_files() -> Iterator[Path]:
    for package in PRODUCTION:
        for path in sorted((REPO / package).rglob("*.py")):
            if FRAMEWORKS not in path.parents:
                yield path


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings: prose may name kinds."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _framework_module(module: str | None) -> bool:
    """One framework's module; the registry and the base class are what generic code may import."""
    return (module or "").startswith("trainop.frameworks.") and module != "trainop.frameworks.base"


def literal_names(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    skip = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if WORD.search(node.value):
                found.append(f"{where}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.ImportFrom) and _framework_module(node.module):
            found.append(f"{where}:{node.lineno}: imports {node.module}")
    return found


def test_no_production_code_outside_the_framework_modules_names_a_kind_or_replica_type() -> None:
    offenders = [
        hit
        for path in production_files()
        for hit in literal_names(path.read_text(), str(path.relative_to(REPO)))
    ]
    assert offenders == []


def test_the_check_sees_a_kind_name_where_one_is_written() -> None:
    source = "\n".join(
        [
            'KIND = "PyTorchJob"',
            'MESSAGE = f"{KIND}: the Worker failed"',
            "from trainop.frameworks.mpi import MPI",
        ]
    )
    assert sorted(literal_names(source, "sample.py")) == [
        "sample.py:1: 'PyTorchJob'",
        "sample.py:2: ': the Worker failed'",
        "sample.py:3: imports trainop.frameworks.mpi",
    ]
