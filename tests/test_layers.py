"""The layers the tree shows, read from the tier map in code (verl_roles/tiers.py): every module is
placed, imports point down or sideways (never up), there is no import cycle, composition is reached
only through the API, and only the compatibility seam (verl_roles/compat/) touches Hydra's or
OmegaConf's private API: a private module imported, a private attribute of a library object, a
private hook of a library class overridden or called on ``self``, a library path named in a string,
a traceback frame read."""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import pytest
from conftest import REPO

from verl_roles.tiers import ONLY_FROM, ROOT_MODULES, TIERS, folder_of, height, rank, tier_of

PACKAGE = REPO / "verl_roles"
# The one package that may use Hydra's and OmegaConf's private API.
SEAM = "verl_roles.compat"

# Private modules of Hydra and OmegaConf (``omegaconf._`` covers _utils, _impl, _yaml...).
PRIVATE_MODULES = (
    "hydra._internal", "hydra.grammar", "omegaconf._", "omegaconf.base", "omegaconf.grammar",
    "omegaconf.vendor",
)
# A library's private code named in a string (a class path, a source file).
PRIVATE_PATHS = ("hydra._internal", "hydra/_internal", "omegaconf._", "omegaconf/_")
# Reading traceback frames (which function of a library raised, with which locals).
FRAME_ATTRIBUTES = {"tb_frame", "f_locals", "f_globals", "f_code", "walk_tb", "walk_stack", "_getframe"}
LIBRARIES = ("hydra", "omegaconf")


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


def test_the_root_holds_only_the_public_face_and_the_entry_shims():
    """Every other module sits in a folder named for its concern (verl_roles/tiers.py lists them)."""
    at_root = sorted("" if path.stem == "__init__" else path.stem for path in PACKAGE.glob("*.py"))
    assert at_root == sorted(ROOT_MODULES) and len(at_root) <= 10, at_root


def upward_imports(imports: dict[str, set[str]]) -> list[str]:
    """Imports that point up: to a higher tier, to a folder listed later in the map (folders are ordered
    within a tier too), or to a tier that only some tiers may import."""
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
            elif height(target) > height(module):  # type: ignore[operator]
                found.append(f"{module} ({folder_of(module)}/) imports {target} ({folder_of(target)}/, "
                             "listed after it)")
    return found


def test_no_import_points_up():
    assert upward_imports(graph()) == []


def test_the_direction_check_fails_on_an_upward_import():
    """The check itself: a core module importing the composition tier, and a command skipping the API."""
    fake = {
        "verl_roles.validation.rules.tables": {"verl_roles.hydra_adapter.loader"},
        "verl_roles.commands.show": {"verl_roles.hydra_adapter.loader", "verl_roles.api.composition"},
        "verl_roles.base.errors": {"verl_roles.base.layout"},
        "verl_roles.inputs.cmdline": {"verl_roles.messages.wording", "verl_roles.upstream.passed_on"},
    }
    assert upward_imports(fake) == [
        "verl_roles.commands.show (commands) imports verl_roles.hydra_adapter.loader "
        "(composition; only ('api',) may)",
        "verl_roles.inputs.cmdline (inputs/) imports verl_roles.messages.wording "
        "(messages/, listed after it)",
        "verl_roles.validation.rules.tables (core) imports verl_roles.hydra_adapter.loader (composition)",
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
# without the parent's clean-up (verl_roles/upstream/verl_prelaunch.py's worker steps).
PUBLIC_UNDERSCORED = {("os", "_exit")}


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes of ``tree`` (text for readers, not a use)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def private_uses(tree: ast.Module) -> list[str]:
    """Imports of private modules; ``x._name`` / ``x.__dict__`` on anything but ``self``/``cls``; a string
    naming a library's private code; a traceback frame read."""
    found = [f"import {name}" for name in imported_names(tree) if name.startswith(PRIVATE_MODULES)]
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) and id(node) not in docstrings else None
        if isinstance(text, str) and any(path in text for path in PRIVATE_PATHS):
            found.append(f"line {node.lineno}: string {text!r}")
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        private = node.attr.startswith("_") and not node.attr.startswith("__") or node.attr == "__dict__"
        if private and owner not in ("self", "cls", "super") and (owner, node.attr) not in PUBLIC_UNDERSCORED:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif node.attr in FRAME_ATTRIBUTES:
            found.append(f"line {node.lineno}: .{node.attr} (a traceback frame)")
    return found


def library_privates(cls: type) -> set[str]:
    """The private names (``_x``, not dunder) the Hydra and OmegaConf classes ``cls`` derives from define."""
    names: set[str] = set()
    for base in cls.__mro__[1:]:
        if base.__module__.split(".")[0] in LIBRARIES:
            names.update(n for n in vars(base) if n.startswith("_") and not n.startswith("__"))
    return names


def hook_uses(tree: ast.Module, namespace: dict[str, object]) -> list[str]:
    """In each class of ``tree`` (the classes themselves in ``namespace``, by name) that derives from a
    Hydra or OmegaConf class: a method overriding a private of the library's, and ``self._x`` /
    ``super()._x`` / ``cls._x`` naming one."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or not isinstance(namespace.get(node.name), type):
            continue
        privates = library_privates(namespace[node.name])  # type: ignore[arg-type]
        if not privates:
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.FunctionDef) and inner.name in privates:
                found.append(f"{node.name}: overrides {inner.name}")
            elif isinstance(inner, ast.Attribute) and inner.attr in privates:
                found.append(f"{node.name}, line {inner.lineno}: uses .{inner.attr}")
    return found


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith(SEAM)))
def test_only_the_compatibility_seam_touches_private_hydra_and_omegaconf_api(module):
    assert private_uses(trees()[module]) == []


# verl_prelaunch runs in verl's Python (it imports verl): read, never imported here.
PRELAUNCH = "verl_roles.upstream.verl_prelaunch"
IMPORTABLE = sorted(m for m in MODULES if not m.startswith(SEAM) and m != PRELAUNCH)


@pytest.mark.parametrize("module", IMPORTABLE)
def test_no_class_outside_the_seam_overrides_or_calls_a_library_private(module):
    """A subclass of a Hydra or OmegaConf class (directly, or through a base of the seam) overrides and
    calls only public names: the seam names each private hook."""
    imported = importlib.import_module(module)
    assert hook_uses(trees()[module], vars(imported)) == []


PLANTED = """
from omegaconf._yaml import get_yaml_loader
import hydra._internal.utils
from omegaconf.vendor.antlr4 import Token
SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"

def content(node):
    return node.__dict__["_content"], node._get_node("a"), error.__traceback__.tb_frame.f_locals
"""


def test_the_private_check_fails_on_a_planted_use():
    found = private_uses(ast.parse(PLANTED))
    assert sorted(found) == sorted([
        "import omegaconf._yaml", "import omegaconf._yaml.get_yaml_loader", "import hydra._internal.utils",
        "import omegaconf.vendor.antlr4", "import omegaconf.vendor.antlr4.Token",
        "line 5: string 'hydra._internal.core_plugins.basic_sweeper.BasicSweeper'",
        "line 8: .__dict__", "line 8: ._get_node", "line 8: .tb_frame (a traceback frame)",
        "line 8: .f_locals (a traceback frame)",
    ])


PLANTED_HOOKS = """
from verl_roles.compat.hydra import LoaderBase

class Loader(LoaderBase):
    def _load_single_config(self, default, repo):
        return super()._load_single_config(default, repo)

    def compose_defaults(self, defaults, repo):
        self._process_config_searchpath(None, [], repo)
        return self.hydra_compose_defaults(defaults, repo)
"""


def test_the_hook_check_fails_on_a_planted_override():
    namespace: dict[str, object] = {}
    exec(compile(PLANTED_HOOKS, "<planted>", "exec"), namespace)  # noqa: S102 - our own text
    assert hook_uses(ast.parse(PLANTED_HOOKS), namespace) == [
        "Loader: overrides _load_single_config",
        "Loader, line 6: uses ._load_single_config",
        "Loader, line 9: uses ._process_config_searchpath",
    ]


def test_verls_checks_import_only_what_verls_python_has():
    """verl_roles/upstream/verl_prelaunch.py runs by path in verl's Python, where verl_roles need not exist:
    the standard library, omegaconf, torch and verl only."""
    import sys

    roots = {name.split(".")[0] for name in imported_names(trees()["verl_roles.upstream.verl_prelaunch"])}
    allowed = set(sys.stdlib_module_names) | {"__future__", "omegaconf", "torch", "verl"}
    assert roots <= allowed, f"verl_prelaunch.py imports {sorted(roots - allowed)}"
