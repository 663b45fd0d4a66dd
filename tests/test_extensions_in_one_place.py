"""Each extension lives in its module (or package) under trainop/extensions/: nothing else imports it.

Admission, the sync, `trainop run`, the UI and the edges meet an extension only through the registry
(trainop.extensions: EXTENSIONS and its helpers) and the shared types (trainop.extensions.base and
.faces). An import of an extension's own module from elsewhere is a piece of that extension spread over
another engine: adding or changing an extension would then mean finding it. Tests are exempt: they test
the extension itself. pyproject.toml's import-linter contract "extensions are reached through the
registry" says the same for the modules listed there; this test also covers a new extension.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

from trainop.extensions import EXTENSIONS

REPO = Path(__file__).resolve().parent.parent
PRODUCTION = ("trainop", "hooks", "webhooks")
PACKAGE = "trainop.extensions"
# The registry may import every extension; an extension may import the shared modules.
REGISTRY = PACKAGE
SHARED = (f"{PACKAGE}.base", f"{PACKAGE}.faces")


def extension_roots() -> set[str]:
    """`trainop.extensions.<name>` of every registered extension's module or package."""
    roots = {".".join(type(ext).__module__.split(".")[:3]) for ext in EXTENSIONS}
    assert not roots & {REGISTRY, *SHARED}, "an extension class lives in the registry or a shared module"
    return roots


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in `tree`, relative ones resolved; `from a import b` yields both
    `a` and `a.b` (b may be a submodule)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def owner(name: str, roots: set[str]) -> str | None:
    return next((r for r in roots if name == r or name.startswith(r + ".")), None)


def violations() -> list[str]:
    roots = extension_roots()
    found = []
    for top in PRODUCTION:
        for path in sorted((REPO / top).rglob("*.py")):
            module = module_name(path)
            tree = ast.parse(path.read_text(), str(path))
            for line, name in imported(tree, module, path.name == "__init__.py"):
                target = owner(name, roots)
                if target is None or module == REGISTRY or owner(module, roots) == target:
                    continue
                found.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return found


def test_no_module_outside_an_extension_imports_it() -> None:
    assert violations() == [], (
        "read the extension through the registry (trainop.extensions.EXTENSIONS) and its faces "
        "(trainop/extensions/faces.py) instead; ARCHITECTURE.md, Adding an extension"
    )


def test_the_check_sees_the_imports_it_must_refuse() -> None:
    roots = extension_roots()
    tree = ast.parse(
        "from trainop.extensions.tensorboard import ANNOTATION\n"
        "from trainop.extensions import jsonlogs\n"
        "from trainop.extensions import EXTENSIONS\n"
        "import trainop.extensions.placement\n"
        "def f():\n    from ..extensions.accelerators import catalogue\n"
    )
    names = {n for _, n in imported(tree, "trainop.ui.wizard", False) if owner(n, roots)}
    assert {owner(n, roots) for n in names} == {
        "trainop.extensions.tensorboard",
        "trainop.extensions.jsonlogs",
        "trainop.extensions.placement",
        "trainop.extensions.accelerators",
    }


def test_the_import_linter_contract_lists_every_extension() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    [contract] = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"] == "extensions are reached through the registry"
    ]
    assert set(contract["forbidden_modules"]) == extension_roots()
