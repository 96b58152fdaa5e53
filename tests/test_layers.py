"""The layers the tree shows: imports inside verl_roles point one way (no cycle), only the Hydra adapter
touches Hydra's or OmegaConf's private API, and the pipeline steps never compose a config."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "verl_roles"
ADAPTER = "verl_roles.hydra_adapter"

# What composes a config or runs Hydra: the commands, the API and the adapter's composing modules.
COMPOSING = ("verl_roles.api", "verl_roles.commands", f"{ADAPTER}.loader", f"{ADAPTER}.app")
# The core: the steps, rules, tables and models the commands are built from.
CORE = (
    "cmdline", "config_tree", "containment", "errors", "key_docs", "layout", "legacy", "limits",
    "lora_rules", "notices",
    "output", "paths", "pipeline", "role_table", "roles", "schema", "slime", "summary", "sweep_grid",
    "text_table", "validate", "wording",
)

# Private modules of Hydra and OmegaConf.
PRIVATE_MODULES = ("hydra._internal", "omegaconf._utils", "omegaconf._impl", "omegaconf.grammar")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def trees() -> dict[str, ast.Module]:
    """Every module's syntax tree, parsed once per session (the tests only read them)."""
    return {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def imported_names(tree: ast.Module) -> set[str]:
    """Every absolute module name an import statement names (lazy imports in functions included)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def package_imports(tree: ast.Module, own: str) -> set[str]:
    return {name for name in imported_names(tree) if name in MODULES and name not in (own, "verl_roles")}


def test_no_import_cycle():
    graph = {name: package_imports(tree, name) for name, tree in trees().items()}
    cycles: list[str] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph[module]):
            if target in path:
                cycles.append(" -> ".join([*path[path.index(target):], target]))
            elif target not in done:
                visit(target, [*path, target])
        done.add(module)

    for module in sorted(graph):
        visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles)))


def private_uses(tree: ast.Module) -> list[str]:
    """Imports of private modules, and ``x._name`` / ``x.__dict__`` on anything but ``self``/``cls``."""
    found = [f"import {name}" for name in imported_names(tree) if name.startswith(PRIVATE_MODULES)]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        private = node.attr.startswith("_") and not node.attr.startswith("__") or node.attr == "__dict__"
        if private and owner not in ("self", "cls", "super"):
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith(ADAPTER)))
def test_only_the_adapter_touches_private_hydra_and_omegaconf_api(module):
    assert private_uses(trees()[module]) == []


def test_the_adapter_says_which_private_symbols_it_uses():
    docstring = ast.get_docstring(ast.parse((PACKAGE / "hydra_adapter" / "__init__.py").read_text()))
    for name, tree in trees().items():
        if not name.startswith(ADAPTER):
            continue
        for use in private_uses(tree):
            symbol = use.rsplit(".", 1)[-1] if use.startswith("line") else use.split()[-1]
            if symbol.startswith("hydra._internal") or symbol.startswith("omegaconf._"):
                symbol = symbol.rsplit(".", 1)[-1]
            assert symbol in docstring, f"{name} uses {use}, which the adapter's docstring does not list"


@pytest.mark.parametrize("module", CORE)
def test_core_never_composes(module):
    """Steps get what they need from the caller (the command line, the stock config, key paths)."""
    name = f"verl_roles.{module}"
    imports = package_imports(trees()[name], name)
    assert not [i for i in imports if i.startswith(COMPOSING)], imports
