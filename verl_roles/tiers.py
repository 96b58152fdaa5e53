"""The tier map: the folders of verl_roles, lowest first, each in its tier.

The package root is the table of contents: the public face (``__init__``: :func:`verl_roles.compose`,
the error and warning types), the two entry shims (``main``: ``python -m verl_roles.main``; ``cli``:
``verl-roles``) and this map. Every other module sits in a folder named for its concern, and the folders
are listed here in order: a module may import modules of its own folder and of the folders listed before
it, never after (the arrows point down, at folder level as well as at tier level). ``tests/test_layers.py``
reads this map: it fails on an import that points up, on an import cycle, on a module or folder the map
does not place, and on an import of the composition tier from anywhere but the API.

- **foundation**: ``compat/``, the only code that touches Hydra's and OmegaConf's private API; ``base/``,
  the words and tables everything uses (errors, notices, the layout of engines and roles, the verl release
  seam, limits, did-you-mean); ``upstream/``, the facts about verl per release (and ``verl_prelaunch``,
  verl's own pre-Ray checks, which runs in verl's Python and imports nothing of verl_roles).
- **values**: ``omegaconf_adapter/``, the lower half of the Hydra adapter: OmegaConf node internals, the
  one YAML dialect, Hydra's override text.
- **core**: works on configs it is handed, never composes one: ``inputs/`` (the command line, flags, the
  config tree, containment, the sweep grid), ``validation/`` (the gate, schema, rules, inert values,
  placeholders), ``legacy/`` and ``slime/`` (the two foreign dialects), ``steps/`` (the pipeline and its
  steps), ``messages/`` (how a user is told), ``runs/`` (how a run reaches the disk), ``views/`` (what a
  run prints about itself).
- **composition**: ``hydra_adapter/``, the upper half of the Hydra adapter: Hydra's loader with our caches
  and gate, the main job as a Hydra app.
- **api**: ``api/``, the one way above composition reaches it (``verl_roles.compose`` is its public face),
  and what plans a run or a sweep through it before anything exists.
- **commands**: ``shell/`` (how a command is declared and run, the command table), ``commands/`` (the
  main job and each command of ``verl-roles``), and the root modules.
"""

from __future__ import annotations

TIERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("compat", "base", "upstream")),
    ("values", ("omegaconf_adapter",)),
    ("core", ("inputs", "validation", "legacy", "slime", "steps", "messages", "runs", "views")),
    ("composition", ("hydra_adapter",)),
    ("api", ("api",)),
    # The root modules last: "" is the package itself (its __init__).
    ("commands", ("shell", "commands", "cli", "main", "tiers", "")),
)

# The modules that may sit at the package root (no folder): the public face and the entry shims.
ROOT_MODULES: tuple[str, ...] = ("", "cli", "main", "tiers")

# A tier that only the listed tiers may import, besides itself: commands reach composition through the API.
ONLY_FROM: dict[str, tuple[str, ...]] = {"composition": ("api",)}


def folder_of(module: str) -> str | None:
    """The folder of ``module`` as the map names it (``verl_roles.validation.rules.tables`` ->
    ``validation``; a root module -> its own name; the package -> ``""``), None outside verl_roles."""
    parts = module.split(".")
    if parts[0] != "verl_roles":
        return None
    return parts[1] if len(parts) > 1 else ""


def tier_of(module: str) -> str | None:
    """The tier of ``module`` (``verl_roles``, ``verl_roles.validation.rules.tables``, ...), or None when the
    map does not place it."""
    folder = folder_of(module)
    for tier, names in TIERS:
        if folder in names:
            return tier
    return None


def rank(tier: str) -> int:
    """The height of ``tier`` in the map (foundation is 0)."""
    return [name for name, _ in TIERS].index(tier)


def height(module: str) -> int | None:
    """The height of ``module``'s folder in the map (``compat`` is 0), None when the map does not place it."""
    order = [name for _, names in TIERS for name in names]
    folder = folder_of(module)
    return order.index(folder) if folder in order else None
