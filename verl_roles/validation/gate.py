"""What a run may contain: the one gate on the composed config, whatever channel brought a value.

A value reaches a run through many channels: the command line, the primary config, a ``--config-dir``,
``hydra.searchpath``, option files, a slime file, the environment (``${oc.env:...}``), the Python API.
The gate does not ask which one: it checks the result, so a channel added tomorrow gets the same
verdict. Three checks, called by the composition tier (every composition) and by the pipeline (the
final config, after every step):

- **No code from config.** Hydra imports and calls what its settings name (logging ``()`` / ``class``
  / ``factory``, ``ext://`` values, callbacks, launchers and sweepers by ``_target_``, a launcher's
  ``setup`` shell lines), and verl instantiates its sections through ``_target_``. A value in such a
  *code slot* is accepted only when a config that verl_roles, Hydra or an installed Hydra plugin ships
  puts that very value at that very key (:func:`hydra_problems`: choosing a shipped option by name,
  ``hydra/job_logging=disabled``, is how such values change), and each ``_target_`` of the trainer
  config is the one verl's own config has at that path (:func:`task_problems`). An interpolation in a
  setting Hydra hands to code is judged by the value it resolves to (``${oc.decode:${oc.env:X}}`` can
  be a callback). Hydra's instantiation keys (``_partial_``, ``_args_``, ...) are never accepted in the
  trainer config.
- **No config source that runs code.** A ``pkg://`` search-path entry imports its package; only a
  package already loaded may be named (:func:`search_path_problems`). Files of ``file://`` entries are
  read by the checked file source (limits, containment) whatever entry named them.
- **No key without an effect** (:func:`task_problems`): a key the typed schema does not know (verl's
  declared surface plus our own keys) is refused inside a section verl builds a dataclass from on its
  way to training (verl would refuse it) and inside our own sections (nothing reads it); inside a
  mapping verl passes on as it is (``override_config``, ``engine_kwargs``...) it is accepted; inside a
  section verl reads as a plain mapping (``data``, ``trainer``...) a near miss of a real key is
  refused (a typo) and any other new key is a warning (only the user's own code can read it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache

from omegaconf import DictConfig, ListConfig

from verl_roles.base import releases
from verl_roles.base.errors import Problem, unknown_key
from verl_roles.base.layout import ENGINE_TABLE, LORA_SECTIONS
from verl_roles.base.suggest import near_names
from verl_roles.omegaconf_adapter.nodes import calls_a_resolver, raw_items
from verl_roles.upstream.passed_on import PassedOn, inside, passed_on
from verl_roles.validation.schema import KeyType, Tree, converted_sections, targets, tree, verl_names

# Keys whose value names code that Hydra or verl imports and calls.
CODE_KEYS = ("_target_", "()", "class", "factory")
# Keys that change how Hydra's instantiate calls a target (verl instantiates with its own _target_ only).
INSTANTIATE_KEYS = ("_partial_", "_args_", "_recursive_", "_convert_")
# A logging config value that Python's logging.config imports (``ext://sys.stdout``).
EXTERNAL = "ext://"
# Settings whose whole value is code a Hydra plugin runs: a launcher's shell lines run before each job.
SCRIPT_KEYS = ("setup",)
# The settings of the ``hydra`` node that Hydra hands to code: Python's logging (which imports any
# ``ext://`` value and calls ``()`` / ``class``), its callbacks, launcher and sweeper (instantiated by
# ``_target_``). An interpolation there is a code slot of its own (kind :data:`INTERPOLATION`): its value
# is known only when resolved, so it is judged by what it resolves to (:func:`hydra_problems`).
HANDED_TO_CODE = ("hydra.callbacks", "hydra.job_logging", "hydra.hydra_logging", "hydra.launcher",
                  "hydra.sweeper")
INTERPOLATION = "${"


@dataclass(frozen=True)
class CodeSlot:
    """One place of a config that names code: its full key, the kind of slot (the key's own name, or
    ``ext://`` for an imported value) and the value as written."""

    path: str
    slot: str
    value: str

    @property
    def allowed_as(self) -> tuple[str, str]:
        """What a shipped config must hold for this slot to be accepted: this value at this key."""
        return (self.path, self.value)


def _text(value: object) -> str:
    """A setting's whole value as text (a list of shell lines compares as a list)."""
    if isinstance(value, DictConfig | ListConfig):
        from omegaconf import OmegaConf

        value = OmegaConf.to_container(value, resolve=False)
    return json.dumps(value, sort_keys=True, default=str)


def _handed_to_code(path: str) -> bool:
    return any(path == section or path.startswith(f"{section}.") for section in HANDED_TO_CODE)


def code_slots(node: object, prefix: str = "") -> Iterator[CodeSlot]:
    """Every code slot of ``node`` (a config or plain mappings and lists), values as written. An
    interpolation stays its text; in a setting Hydra hands to code (:data:`HANDED_TO_CODE`) it is a slot
    of its own, whatever its key (``hydra.callbacks.x: ${oc.decode:...}`` becomes a callback)."""
    items: Iterable[tuple[object, object]]
    if isinstance(node, DictConfig | ListConfig):
        items = raw_items(node)
    elif isinstance(node, Mapping):
        items = node.items()
    elif isinstance(node, list | tuple):
        items = enumerate(node)
    else:
        return
    # Runs over every key of every composition: a leaf's path is spelt out only for a slot.
    launcher = prefix.startswith("hydra.launcher.")
    for key, value in items:
        name = key if type(key) is str else str(key)
        if launcher and name in SCRIPT_KEYS:
            yield CodeSlot(f"{prefix}{name}", name, _text(value))
        elif type(value) not in _LEAVES and isinstance(value, _CONTAINERS):
            yield from code_slots(value, f"{prefix}{name}.")
        else:
            slot = _leaf_slot(prefix, name, value)
            if slot is not None:
                yield slot


# The types of most values: checked first, since telling them from a mapping (an ABC) costs more.
_LEAVES = frozenset((str, int, float, bool, type(None)))
_CONTAINERS = (DictConfig, ListConfig, Mapping, list, tuple)


def _leaf_slot(prefix: str, name: str, value: object) -> CodeSlot | None:
    """The code slot a value that holds no other value makes at ``prefix + name``, if any."""
    if isinstance(value, str) and INTERPOLATION in value and _handed_to_code(f"{prefix}{name}"):
        return CodeSlot(f"{prefix}{name}", INTERPOLATION, value)
    if name in CODE_KEYS or name in INSTANTIATE_KEYS:
        return CodeSlot(f"{prefix}{name}", name, "null" if value is None else str(value))
    if isinstance(value, str) and value.startswith(EXTERNAL):
        return CodeSlot(f"{prefix}{name}", EXTERNAL, value)
    return None


def hydra_problems(hydra: object, allowed: Collection[tuple[str, str]]) -> list[Problem]:
    """Code slots of the composed ``hydra`` node whose value no shipped config puts at that key
    (``allowed``: (key, value) pairs read from the shipped configs, each at the package it mounts at).
    An interpolation no shipped config has there is judged by the value it resolves to now, which is
    the value Hydra will hand on: it may name no code, and it must resolve (what only a running Hydra
    knows cannot be checked, so it is refused)."""
    problems = []
    for slot in code_slots(hydra, "hydra."):
        if slot.allowed_as in allowed:
            continue
        if slot.slot == INTERPOLATION:
            problems += _interpolation_problems(hydra, slot, allowed)
            continue
        problems.append(_code_problem(slot))
    return problems


_FIX_HYDRA_CODE = ("remove it; choose Hydra's launcher, sweeper and logging by option name instead "
                   "(hydra/launcher=joblib, hydra/job_logging=disabled), and set their plain settings "
                   "(hydra.launcher.n_jobs=4)")


def _code_problem(slot: CodeSlot, through: str = "") -> Problem:
    what = ("holds shell lines the launcher runs before each job" if slot.slot in SCRIPT_KEYS
            else "names code Hydra would import and call")
    return Problem(
        key=slot.path,
        message=f"{what} ({slot.value!r}{through}), and no config that verl_roles, Hydra or an installed "
        "Hydra plugin ships sets it there",
        fix=_FIX_HYDRA_CODE,
    )


def _interpolation_problems(
    hydra: object, slot: CodeSlot, allowed: Collection[tuple[str, str]]
) -> list[Problem]:
    """An interpolation in a setting Hydra hands to code, judged by its value: the code slots of what it
    resolves to (a mapping with a ``_target_``, an ``ext://`` text, a value at a ``class`` key) must be
    shipped ones, and it must resolve before Hydra runs."""
    from omegaconf import OmegaConf

    relative = slot.path.removeprefix("hydra.")
    try:
        value = OmegaConf.select(hydra, relative, throw_on_resolution_failure=True, throw_on_missing=True)
        if isinstance(value, DictConfig | ListConfig):
            value = OmegaConf.to_container(value, resolve=True)
    except Exception as error:  # noqa: BLE001 - any failure to resolve: the value cannot be checked
        if not calls_a_resolver(slot.value.replace("${hydra:", "${")):
            # Only references to other keys (``${hydra.runtime.output_dir}/x.log``), which Hydra fills
            # with its own run-time values when it runs; each key referred to is checked where it sits.
            return []
        reason = " ".join(str(error).split()).split(" full_key:")[0] or type(error).__name__
        return [Problem(
            key=slot.path,
            message=f"is an interpolation ({slot.value!r}) in a setting Hydra hands to code (logging, "
            f"callbacks, launcher, sweeper), and it cannot be resolved before Hydra runs ({reason}), so what "
            "it would name cannot be checked",
            fix="write the value itself instead of an interpolation, or leave the setting at what Hydra "
            "ships (drop the override or file entry that sets it)",
        )]
    through = f", through {slot.value!r}"
    name = slot.path.rpartition(".")[2]
    if isinstance(value, Mapping | list | tuple):
        found = list(code_slots(value, f"{slot.path}."))
    elif name in (*CODE_KEYS, *INSTANTIATE_KEYS, *SCRIPT_KEYS) or (
            isinstance(value, str) and value.startswith(EXTERNAL)):
        kind = name if name in (*CODE_KEYS, *INSTANTIATE_KEYS, *SCRIPT_KEYS) else EXTERNAL
        found = [CodeSlot(slot.path, kind, _text(value) if kind in SCRIPT_KEYS else str(value))]
    else:
        found = []
    return [_code_problem(inner, through) for inner in found if inner.allowed_as not in allowed]


# Hydra's two logging settings, each handed to Python's logging.config.dictConfig when set.
LOGGING_NODES = ("hydra.job_logging", "hydra.hydra_logging")


def logging_problems(hydra: object) -> list[Problem]:
    """What Python's ``logging.config.dictConfig`` (which Hydra hands its logging settings to) refuses, as
    far as a config shows it: a setting without its root logger, another schema version, a level name
    logging does not know, a handler, formatter or filter named but not defined."""
    from omegaconf import OmegaConf

    problems: list[Problem] = []
    for key in LOGGING_NODES:
        node = OmegaConf.select(hydra, key.partition(".")[2], default=None) if hydra is not None else None
        if node is None:
            continue
        conf = OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) else node
        if not isinstance(conf, dict):
            problems.append(_logging_problem(key, "is not a mapping of logging settings"))
            continue
        if "root" not in conf:
            problems.append(_logging_problem(key, "has no root logger (`root`), which Hydra sets up first"))
        if conf.get("version", 1) != 1:
            problems.append(_logging_problem(f"{key}.version", f"is {conf.get('version')!r}; Python's "
                                             "logging configuration knows only version 1"))
        problems += _logging_references(key, conf)
    return problems


def _logging_references(key: str, conf: dict) -> list[Problem]:
    import logging

    levels = logging.getLevelNamesMapping()
    problems = []
    sections = {name: conf.get(name) or {} for name in ("handlers", "formatters", "filters", "loggers")}
    users = {"root": conf.get("root") or {}, **{f"loggers.{n}": v for n, v in sections["loggers"].items()},
             **{f"handlers.{n}": v for n, v in sections["handlers"].items()}}
    for where, entry in users.items():
        if not isinstance(entry, dict):
            continue
        level = entry.get("level")
        if isinstance(level, str) and INTERPOLATION in level:
            continue  # judged by what it resolves to, with the other interpolations (hydra_problems)
        if level is not None and not (isinstance(level, int) or str(level).upper() in levels):
            problems.append(_logging_problem(f"{key}.{where}.level", f"is {level!r}, not a logging level",
                                             expected=", ".join(sorted(levels))))
        for kind, names in (("handlers", entry.get("handlers")), ("filters", entry.get("filters"))):
            for name in names or ():
                if name not in sections[kind]:
                    problems.append(_logging_problem(f"{key}.{where}.{kind}", f"names {name!r}, which is not "
                                                     f"one of {key}.{kind}"))
        formatter = entry.get("formatter")
        if formatter is not None and formatter not in sections["formatters"]:
            problems.append(_logging_problem(f"{key}.{where}.formatter", f"names {formatter!r}, which is not "
                                             f"one of {key}.formatters"))
    return problems


def _logging_problem(key: str, message: str, expected: str = "") -> Problem:
    return Problem(
        key=key, message=f"{message}: Python's logging would refuse it when Hydra sets logging up",
        expected=expected,
        fix="choose a logging option by name (hydra/job_logging=default, disabled, none or stdout), or fix "
        "the setting",
    )


def search_path_problems(entries: Sequence[str], loaded: Collection[str] | None = None) -> list[Problem]:
    """Search-path entries that would run code to be read: a ``pkg://`` package not loaded yet (reading
    it imports it), or a scheme Hydra would resolve through a plugin we do not know; and a ``file://``
    entry that is no folder one can read (Hydra would skip it with a warning, and every option the user
    put there would silently not apply, as with a ``--config-dir`` that is no folder)."""
    modules = sys.modules if loaded is None else loaded
    problems = []
    for entry in entries:
        scheme, sep, rest = entry.partition("://")
        if not sep or scheme == "file":
            problem = _folder_problem(entry, rest if sep else entry)
            if problem is not None:
                problems.append(problem)
            continue
        if scheme == "structured":
            continue
        if scheme == "pkg" and rest in modules:
            continue
        what = (f"the package {rest!r}, which is not loaded: reading it would import it (run its code)"
                if scheme == "pkg" else f"a {scheme}:// source, which verl_roles does not read")
        problems.append(Problem(
            key="hydra.searchpath",
            message=f"the entry {entry!r} names {what}",
            fix="put your config files in a folder and name it with file://DIR (or --config-dir DIR)",
        ))
    return problems


def _folder_problem(entry: str, folder: str) -> Problem | None:
    if os.path.isdir(folder) and os.access(folder, os.R_OK | os.X_OK):
        return None
    what = ("is a folder you may not read" if os.path.isdir(folder)
            else "is a file, not a folder" if os.path.exists(folder) else "does not exist")
    return Problem(
        key="hydra.searchpath",
        message=f"the entry {entry!r} names no folder Hydra can read: {folder!r} {what}, so none of the "
        "config files meant to be there would be read",
        fix="name the folder that holds your config files (file:///absolute/path), or remove the entry",
    )


@dataclass(frozen=True)
class Surface:
    """What a trainer config may hold for one engine and verl release: the typed schema tree, the
    ``_target_`` of every section verl builds as a dataclass, and the sections that are ours (nothing
    reads a key added there)."""

    tree: Tree
    targets: Mapping[str, str]
    converted: Collection[str]
    own_sections: Collection[str]
    release: str

    def owns(self, section: str) -> bool:
        """``section`` is one of verl_roles' own sections or inside one: nothing reads a key added there."""
        return _owned(section, tuple(self.own_sections))

    def builds(self, section: str) -> bool:
        """verl builds a dataclass from ``section`` (so it refuses a key the dataclass has no field for)."""
        return any(fnmatchcase(section, pattern) for pattern in self.converted)


@lru_cache(maxsize=4096)
def _owned(section: str, own_sections: tuple[str, ...]) -> bool:
    # Asked for every section of every composition: remembered.
    return any(section == own or section.startswith(f"{own}.") for own in own_sections)


@dataclass(frozen=True)
class Findings:
    """What :func:`task_problems` found: problems (the run stops) and warnings (it goes on)."""

    problems: tuple[Problem, ...]
    warnings: tuple[str, ...]


def surface(engine: str, release: str) -> Surface:
    """The surface of ``engine`` under the verl ``release``."""
    own = (*(e.baseline for e in ENGINE_TABLE), *LORA_SECTIONS)
    return Surface(tree(engine, release), targets(engine, release), converted_sections(engine, release), own,
                   release)


def task_problems(cfg: DictConfig, surface: Surface) -> Findings:
    """The trainer config ``cfg`` (resolved) against ``surface``: foreign code and keys without an effect."""
    problems: list[Problem] = []
    warnings: list[str] = []
    for slot in code_slots(cfg):
        problem = _target_problem(slot, surface)
        if problem is not None:
            problems.append(problem)
    _walk(cfg, surface.tree, "", surface, problems, warnings)
    return Findings(tuple(problems), tuple(warnings))


def _target_problem(slot: CodeSlot, surface: Surface) -> Problem | None:
    section = slot.path.rpartition(".")[0]
    if slot.slot == "_target_":
        expected = surface.targets.get(section)
        if expected == slot.value:
            return None
        shipped = (f"verl {surface.release} builds `{section}` as {expected}" if expected is not None
                   else f"verl {surface.release} builds no class from `{section}`")
        return Problem(
            key=slot.path,
            message=f"names the class verl would build `{section}` with ({slot.value!r}); {shipped}, "
            "and a config never chooses code",
            fix=f"remove the override or file entry that sets {slot.path} (it keeps verl's own value)",
        )
    if slot.slot in INSTANTIATE_KEYS:
        return Problem(
            key=slot.path,
            message=f"is one of Hydra's instantiation keys ({', '.join(INSTANTIATE_KEYS)}); verl builds its "
            "sections from its own _target_ only, and a config never changes how code is called",
            fix=f"remove {slot.path}",
        )
    return None


def _walk(
    node: DictConfig, tree: Tree, prefix: str, surface: Surface, problems: list[Problem], warnings: list[str]
) -> None:
    section = prefix[:-1]
    for key, value in raw_items(node):
        name = key if type(key) is str else str(key)
        entry = tree.get(name)
        if entry is None:
            if name in CODE_KEYS or name in INSTANTIATE_KEYS:
                continue  # judged as code above
            _added_key(f"{prefix}{name}", section, name, tree, surface, problems, warnings)
            continue
        if not isinstance(value, DictConfig):
            continue
        key_type, subtree = entry
        path = f"{prefix}{name}"
        handed = None if surface.owns(path) else passed_on(path)
        if handed is not None:
            # verl hands it to another library: its keys are judged by what that call accepts.
            if subtree is not None or _parameters(handed, surface) is not None:
                _walk(value, subtree or {}, f"{path}.", surface, problems, warnings)
            continue
        if subtree is None:
            continue  # a mapping the schema types as a whole (dict / Any): verl passes it on
        if key_type is not None and _free(key_type) and not surface.owns(path):
            continue  # verl passes the mapping on; a section of ours (the LoRA block) is read key by key
        _walk(value, subtree, f"{path}.", surface, problems, warnings)


def _free(key_type: KeyType) -> bool:
    """A section typed as a whole as a mapping (``dict``, ``Any``): verl passes it on, keys and all."""
    return key_type.accepts_mapping()


def _added_key(
    path: str, section: str, name: str, tree: Tree, surface: Surface,
    problems: list[Problem], warnings: list[str],
) -> None:
    siblings = [key for key in tree if key not in CODE_KEYS]
    close = [f"{section}.{near}" if section else near for near in near_names(name, siblings)]
    where = f"`{section}`" if section else "the top level of the config"
    in_verl = f"`{section}` of verl's config" if section else "the top level of verl's config"
    listing = f"`verl-roles keys '{section}.*'` lists the keys of {where}" if section else (
        "`verl-roles keys` lists every key")
    elsewhere = releases.elsewhere_problem_text(
        path, surface.release, chosen=surface.release != releases.DEFAULT_RELEASE)

    def unknown(because: str) -> Problem:
        return unknown_key(path, where, because=because, guesses=close, fix=listing)

    handed = None if surface.owns(section) else inside(section)
    if handed is not None:
        # Below the section itself (a value of one parameter, a nested override), the library reads it.
        problem = _passed_on_problem(path, name, handed, surface) if handed.matches(section) else None
        if problem is not None:
            problems.append(problem)
    elif elsewhere is not None:
        problems.append(Problem(key=path, message=elsewhere[0], fix=elsewhere[1]))
    elif surface.builds(section):
        target = surface.targets.get(section)
        built = f"as {target}" if target else "as a dataclass"
        problems.append(unknown(
            f"verl {surface.release} builds that section {built}, which has no field `{name}`, so verl "
            "would refuse the config"))
    elif surface.owns(section):
        problems.append(unknown("it is one of verl_roles' own sections, and nothing reads the key"))
    elif close:
        problems.append(unknown("it is spelt like one that is"))
    else:
        warnings.append(
            f"{path} is not a key verl {surface.release} reads (it is not in {in_verl}, "
            "which verl reads as a plain mapping); it does something only if code of your own reads it. "
            f"{listing[0].upper()}{listing[1:]}."
        )


def _parameters(handed: PassedOn, surface: Surface) -> tuple[str, ...] | None:
    """The keyword names the call receiving ``handed`` accepts under the surface's release, or None when
    they are not known (a free mapping)."""
    if not handed.parameters:
        return None
    return verl_names(handed.parameters, surface.release) or None


def _passed_on_problem(path: str, name: str, handed: PassedOn, surface: Surface) -> Problem | None:
    """A key added to a section verl passes on to another library: accepted when the receiving call takes
    it or when what it takes is not known; refused (with the nearest real name) when it does not."""
    accepted = _parameters(handed, surface)
    if accepted is None or name in accepted:
        return None
    close = [f"{handed.section_of(path)}.{near}" for near in near_names(name, accepted)]
    section = handed.section_of(path)
    return unknown_key(
        path, f"`{section}`",
        because=f"verl {surface.release} passes that section to {handed.library} as {handed.call}, "
        f"which takes no `{name}` and would raise when the run starts",
        guesses=close,
        fix=f"`verl-roles keys '{section}.*'` lists what {handed.call.partition('(')[0]} takes",
    )
