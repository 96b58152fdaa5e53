"""The tier map: which layer each part of verl_roles is in, lowest first.

A module may import modules of its own tier and of the tiers below it, never above (the arrows point
down). ``tests/test_layers.py`` reads this map: it fails on an upward import, on an import cycle, on a
module the map does not place, and on an import of the composition tier from anywhere but the API.

- **foundation**: the words and tables everything uses (errors, notices, the layout of engines and
  roles, the verl release seam, file limits), and the compatibility seam with Hydra and OmegaConf
  (:mod:`verl_roles.compat`, the only code that touches their private API); imports nothing of
  verl_roles above itself. Also ``verl_prelaunch``, verl's own pre-Ray checks, which runs in verl's
  Python and imports nothing of verl_roles at all.
- **values**: the lower half of the Hydra adapter: OmegaConf node internals, the one YAML dialect,
  Hydra's override text (:mod:`verl_roles.omegaconf_adapter`).
- **core**: the command-line model, the gate, the pipeline steps, the rules, the schema, wording and
  the write protocol. Works on configs it is handed; never composes one.
- **composition**: the upper half of the Hydra adapter: Hydra's loader with our caches and gate, the
  main job as a Hydra app (:mod:`verl_roles.hydra_adapter`).
- **api**: the one way above composition reaches it (:mod:`verl_roles.api`; ``verl_roles.compose`` is
  its public face), and what plans a run through it before anything exists (:mod:`verl_roles.planning`).
- **commands**: the entry points: the main job, ``verl-roles`` and each of its commands.

An entry names a module (``verl_roles.<name>``) or a package (every module under it).
"""

from __future__ import annotations

TIERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "compat", "errors", "inert_table", "installation", "key_docs", "layout", "limits", "notices",
            "own_types", "passed_on", "program", "releases", "suggest", "text_table", "tiers",
            "verl_differences", "verl_prelaunch",
        ),
    ),
    ("values", ("omegaconf_adapter",)),
    (
        "core",
        (
            "cmdline", "config_tree", "containment", "flags", "flat_lora", "gate", "inert", "legacy",
            "library_messages", "paths", "pipeline", "placeholders", "role_table", "roles", "rules",
            "run_files", "schema",
            "sequence_parallel", "slime", "summary", "sweep_grid", "sweep_isolation", "wording",
            "write_protocol",
        ),
    ),
    ("composition", ("hydra_adapter",)),
    ("api", ("api", "planning", "sweep_planning")),
    ("commands", ("cli", "commands", "main", "")),
)

# A tier that only the listed tiers may import, besides itself: commands reach composition through the API.
ONLY_FROM: dict[str, tuple[str, ...]] = {"composition": ("api",)}


def tier_of(module: str) -> str | None:
    """The tier of ``module`` (``verl_roles``, ``verl_roles.rules.tables``, ...), or None when the map
    does not place it. The package itself (``verl_roles``, whose ``__init__`` re-exports the API) is
    the entry named ``""``."""
    parts = module.split(".")
    if parts[0] != "verl_roles":
        return None
    head = parts[1] if len(parts) > 1 else ""
    for tier, names in TIERS:
        if head in names:
            return tier
    return None


def rank(tier: str) -> int:
    """The height of ``tier`` in the map (foundation is 0)."""
    return [name for name, _ in TIERS].index(tier)
