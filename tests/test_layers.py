"""The layers the tree shows, read from the tier map in code (verl_roles/tiers.py): every module is
placed, imports point down or sideways (never up), there is no import cycle, composition is reached
only through the API, and only the two halves of the Hydra adapter touch Hydra's or OmegaConf's
private API, each listing the symbols it uses."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest
from conftest import REPO

from verl_roles.tiers import ONLY_FROM, TIERS, rank, tier_of

PACKAGE = REPO / "verl_roles"
ADAPTERS = ("verl_roles.omegaconf_adapter", "verl_roles.hydra_adapter")

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


def graph() -> dict[str, set[str]]:
    return {name: package_imports(tree, name) for name, tree in trees().items()}


def test_every_module_is_placed_in_the_tier_map():
    unplaced = sorted(name for name in MODULES if tier_of(name) is None)
    assert not unplaced, f"modules the tier map (verl_roles/tiers.py) does not place: {unplaced}"


def test_the_tier_map_names_only_what_exists():
    heads = {name.split(".")[1] if "." in name else "" for name in MODULES}
    stale = [entry for _, entries in TIERS for entry in entries if entry not in heads]
    assert not stale, f"tier map entries with no module: {stale}"


def upward_imports(imports: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(imports.items()):
        here = tier_of(module)
        for target in sorted(targets):
            there = tier_of(target)
            if here is None or there is None:
                continue
            if rank(there) > rank(here):
                found.append(f"{module} ({here}) imports {target} ({there})")
            elif there in ONLY_FROM and here != there and here not in ONLY_FROM[there]:
                found.append(f"{module} ({here}) imports {target} ({there}; only {ONLY_FROM[there]} may)")
    return found


def test_no_import_points_up():
    assert upward_imports(graph()) == []


def test_the_direction_check_fails_on_an_upward_import():
    """The check itself: a core module importing the composition tier, and a command skipping the API."""
    fake = {
        "verl_roles.rules.tables": {"verl_roles.hydra_adapter.loader"},
        "verl_roles.commands.show": {"verl_roles.hydra_adapter.loader", "verl_roles.api"},
        "verl_roles.errors": {"verl_roles.layout"},
    }
    assert upward_imports(fake) == [
        "verl_roles.commands.show (commands) imports verl_roles.hydra_adapter.loader "
        "(composition; only ('api',) may)",
        "verl_roles.rules.tables (core) imports verl_roles.hydra_adapter.loader (composition)",
    ]


def test_no_import_cycle():
    imports = graph()
    cycles: list[str] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(imports[module]):
            if target in path:
                cycles.append(" -> ".join([*path[path.index(target):], target]))
            elif target not in done:
                visit(target, [*path, target])
        done.add(module)

    for module in sorted(imports):
        visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(sorted(set(cycles)))


# Public names of the standard library that start with an underscore: ``os._exit`` ends a forked child
# without the parent's clean-up (verl_roles/verl_prelaunch.py's worker steps).
PUBLIC_UNDERSCORED = {("os", "_exit")}


def private_uses(tree: ast.Module) -> list[str]:
    """Imports of private modules, and ``x._name`` / ``x.__dict__`` on anything but ``self``/``cls``."""
    found = [f"import {name}" for name in imported_names(tree) if name.startswith(PRIVATE_MODULES)]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        private = node.attr.startswith("_") and not node.attr.startswith("__") or node.attr == "__dict__"
        if private and owner not in ("self", "cls", "super") and (owner, node.attr) not in PUBLIC_UNDERSCORED:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith(ADAPTERS)))
def test_only_the_adapter_touches_private_hydra_and_omegaconf_api(module):
    assert private_uses(trees()[module]) == []


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_each_adapter_half_says_which_private_symbols_it_uses(adapter):
    folder = PACKAGE / adapter.split(".")[1]
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
    for name, tree in trees().items():
        if not name.startswith(adapter):
            continue
        for use in private_uses(tree):
            symbol = use.rsplit(".", 1)[-1] if use.startswith("line") else use.split()[-1]
            if symbol.startswith("hydra._internal") or symbol.startswith("omegaconf._"):
                symbol = symbol.rsplit(".", 1)[-1]
            assert symbol in docstring, f"{name} uses {use}, which {adapter}'s docstring does not list"


def test_verls_checks_import_only_what_verls_python_has():
    """verl_roles/verl_prelaunch.py runs by path in verl's Python, where verl_roles need not exist: the
    standard library, omegaconf, torch and verl only."""
    import sys

    roots = {name.split(".")[0] for name in imported_names(trees()["verl_roles.verl_prelaunch"])}
    allowed = set(sys.stdlib_module_names) | {"__future__", "omegaconf", "torch", "verl"}
    assert roots <= allowed, f"verl_prelaunch.py imports {sorted(roots - allowed)}"
