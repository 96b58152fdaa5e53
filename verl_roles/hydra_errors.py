"""Turn Hydra, OmegaConf and YAML errors into our :class:`ConfigError`, worded so a user can act on it.

Only runs when composition already failed, so the extra work it does (composing the config once more
to learn the real key set for "did you mean") never slows down a config that composes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import NoReturn

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig
from omegaconf.errors import InterpolationKeyError, OmegaConfBaseException

from verl_roles.cli_errors import one_paragraph
from verl_roles.errors import ConfigError, Problem, config_files_origin
from verl_roles.layout import DEFAULT_ENGINE, ENGINE_ALIASES, ENGINE_KEY, ENGINES

LIBRARY_ERRORS = (ConfigCompositionException, OmegaConfBaseException, OverrideParseException, yaml.YAMLError)


@dataclass
class CommandLine:
    """What the user asked for: the primary config, an extra config dir and the overrides."""

    config_name: str
    overrides: list[str]
    config_dir: str | None = None
    parsed: list[Override] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.parsed = []
        parser = OverridesParser.create()
        for text in self.overrides:
            try:
                self.parsed.extend(parser.parse_overrides([text]))
            except OverrideParseException:
                continue

    def override_for(self, key: str) -> Override | None:
        """The last override that sets ``key`` or one of its parents."""
        found = None
        for override in self.parsed:
            target = override.key_or_group
            if key == target or key.startswith(target + "."):
                found = override
        return found

    def origin_of(self, key: str) -> str:
        override = self.override_for(key)
        return f"the command line override `{override.input_line}`" if override is not None else ""

    def engine(self, default: str) -> str:
        for override in reversed(self.parsed):
            if override.key_or_group == ENGINE_KEY and not override.is_sweep_override():
                value = str(override.value())
                return ENGINE_ALIASES.get(value, value)
        return ENGINE_ALIASES.get(default, default)


def parse_hydra_args(args: Sequence[str], default_config: str) -> CommandLine:
    """Split a ``python -m verl_roles.main`` argument list into config name, config dir and overrides."""
    with_value = {"--config-name", "-cn", "--config-dir", "-cd", "--config-path", "-cp", "--cfg", "-c",
                  "--package", "-p", "--experimental-rerun"}
    info_values = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}
    config_name, config_dir, overrides = default_config, None, []
    items = list(args)
    i = 0
    while i < len(items):
        item = items[i]
        name, eq, inline = item.partition("=")
        if item.startswith("-") and name in with_value:
            value = inline if eq else (items[i + 1] if i + 1 < len(items) else "")
            i += 1 if eq else 2
            if name in ("--config-name", "-cn"):
                config_name = value
            elif name in ("--config-dir", "-cd"):
                config_dir = str(Path(value).expanduser().resolve())
            continue
        if item in ("--info", "-i"):
            i += 2 if i + 1 < len(items) and items[i + 1] in info_values else 1
            continue
        if not item.startswith("-") and not item.startswith("hydra."):
            overrides.append(item)
        i += 1
    return CommandLine(config_name=config_name, overrides=overrides, config_dir=config_dir)


def translate(error: BaseException, command: CommandLine) -> ConfigError:
    """Our ConfigError for a library ``error`` raised while composing ``command``."""
    if isinstance(error, ConfigError):
        return with_origins(error, command)
    problems = list(_problems(error, command))
    return ConfigError(problems)


def raise_translated(error: BaseException, command: CommandLine) -> NoReturn:
    """Raise :func:`translate` of ``error``, chained to the original for ``--debug``."""
    translated = translate(error, command)
    if translated is error:
        raise error
    raise translated from error


def with_origins(error: ConfigError, command: CommandLine) -> ConfigError:
    """Fill in where each problem's value came from when the command line set it."""
    problems = [_command_origin_first(p, command) for p in error.problems]
    if all(a == b for a, b in zip(problems, error.problems, strict=True)):
        return error
    return ConfigError(problems)


def _command_origin_first(problem: Problem, command: CommandLine) -> Problem:
    """The command line, when it set the key, is where the value came from; else keep what is known."""
    if problem.origin and problem.origin != config_files_origin(problem.key):
        return problem
    return replace(problem, origin=command.origin_of(problem.key) or problem.origin)


# --- the shapes of library errors we know -------------------------------------------------------

_NOT_IN_STRUCT = re.compile(r"Could not override '([^']+)'")
_ALREADY_THERE = re.compile(r"Could not append to config\. An item is already at '([^']+)'")
_INTERPOLATION_KEY = re.compile(r"Interpolation key '([^']+)' not found")


def _problems(error: BaseException, command: CommandLine) -> Iterable[Problem]:
    text = str(error)
    if isinstance(error, yaml.YAMLError):
        yield _yaml_problem(error)
    elif isinstance(error, OverrideParseException):
        yield Problem(
            key=f"`{error.override}`" if error.override else "command line",
            message=f"is not a valid Hydra override: {one_paragraph(error.message)}",
            fix="write KEY=VALUE and quote values with spaces or brackets, e.g. `'key=[a,b]'` "
            "(grammar: https://hydra.cc/docs/advanced/override_grammar/basic/)",
        )
    elif isinstance(error, MissingConfigException) and error.missing_cfg_file and error.options is not None:
        yield _missing_option_problem(error, command)
    elif match := _NOT_IN_STRUCT.search(text):
        yield _unknown_key_problem(match.group(1), command)
    elif match := _ALREADY_THERE.search(text):
        key = match.group(1)
        override = command.override_for(key)
        value = override.get_value_element_as_str() if override is not None else "VALUE"
        yield Problem(
            key=key,
            message="already exists, so `+` (which adds a new key) does not apply",
            origin=command.origin_of(key),
            fix=f"drop the `+`: write `{key}={value}` (or `++{key}={value}` to add-or-override)",
        )
    elif isinstance(error, InterpolationKeyError) or _INTERPOLATION_KEY.search(text):
        yield _interpolation_problem(error, command)
    else:
        key = getattr(error, "full_key", None) or "config"
        message = getattr(error, "msg", None) or text
        yield Problem(key=key, message=one_paragraph(message), origin=command.origin_of(key) if key else "")


def _yaml_problem(error: yaml.YAMLError) -> Problem:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or one_paragraph(str(error))
    if mark is None:
        return Problem(key="YAML file", message=f"is not valid YAML: {problem}", fix="fix the YAML syntax")
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    return Problem(
        key=mark.name,
        message=f"is not valid YAML at {where}: {problem}",
        fix=f"fix the YAML syntax at {where} of {mark.name}",
    )


def _missing_option_problem(error: MissingConfigException, command: CommandLine) -> Problem:
    group, _, option = str(error.missing_cfg_file).rpartition("/")
    options = sorted(str(o) for o in error.options or ())
    close = difflib.get_close_matches(option, options, n=1)
    fix = f"did you mean `{group}={close[0]}`?" if close else ""
    if not fix and options:
        fix = f"pick one, e.g. `{group}={options[0]}`"
    return Problem(
        key=group,
        message=f"has no option {option!r}",
        expected="one of " + ", ".join(options) if options else "",
        origin=command.origin_of(group),
        fix=fix,
    )


def _unknown_key_problem(key: str, command: CommandLine) -> Problem:
    override = command.override_for(key)
    value = override.get_value_element_as_str() if override is not None else "VALUE"
    origin = command.origin_of(key)
    leaf = key.rsplit(".", 1)[-1]
    if leaf == ENGINE_KEY and key != ENGINE_KEY:
        return Problem(
            key=key,
            message="is not a key: the training engine is chosen once, by the top-level group `model_engine`",
            origin=origin,
            fix=f"write `model_engine={value}` (it switches actor, ref and critic together)",
        )
    knowledge = KeyKnowledge(command)
    if "/" in key:
        return _unknown_group_problem(key, value, origin, knowledge)
    current = knowledge.engine
    for engine in ENGINES:
        if engine != current and key in knowledge.keys_for(engine) and key not in knowledge.keys_for(current):
            return Problem(
                key=key,
                message=f"exists only with model_engine={engine}; the config was composed with "
                f"model_engine={current}",
                origin=origin,
                fix=f"add `model_engine={engine}` to the command line",
            )
    guess = knowledge.closest(key)
    fix = f"did you mean `{guess}`? Write `{guess}={value}`; " if guess else ""
    fix += f"if you mean to add a new key, write `+{key}={value}`"
    message = 'is not a key of the config (Hydra says "not in struct")'
    return Problem(key=key, message=message, origin=origin, fix=fix)


def _unknown_group_problem(key: str, value: str, origin: str, knowledge: KeyKnowledge) -> Problem:
    groups = knowledge.groups
    close = difflib.get_close_matches(key, groups, n=1)
    fix = f"did you mean `{close[0]}={value}`?" if close else "use one of the config groups"
    return Problem(key=key, message="is not a config group", expected="one of " + ", ".join(groups),
                   origin=origin, fix=fix)


def _interpolation_problem(error: BaseException, command: CommandLine) -> Problem:
    key = getattr(error, "full_key", None) or "config"
    match = _INTERPOLATION_KEY.search(str(error))
    target = match.group(1) if match else "?"
    guess = KeyKnowledge(command).closest(target)
    fix = f"did you mean `${{{guess}}}`?" if guess else "point it at an existing key"
    return Problem(
        key=key,
        message=f"refers to `${{{target}}}`, which is not a key of the config",
        origin=command.origin_of(key),
        fix=fix,
    )


class KeyKnowledge:
    """The real key set of the user's composition, learned by composing it again on the error path.

    Only the group choices of the command line are kept (those decide which keys exist); value
    overrides are left out, since one of them is what failed.
    """

    def __init__(self, command: CommandLine):
        self.command = command
        self._keys: dict[str, set[str]] = {}
        self._groups: list[str] | None = None
        base = self._key_set(engine=None)
        chosen = (k.partition("=")[2] for k in base if k.startswith(f"{ENGINE_KEY}="))
        default_engine = next(chosen, DEFAULT_ENGINE)
        self.engine = command.engine(default_engine)
        self._keys[self.engine] = {k for k in base if "=" not in k}

    @property
    def groups(self) -> list[str]:
        if self._groups is None:
            self._groups = _group_names(self.command)
        return self._groups

    def _group_overrides(self, engine: str | None) -> list[str]:
        groups = set(self.groups)
        kept = []
        for override in self.command.parsed:
            name = override.key_or_group
            if override.is_sweep_override() or override.type != OverrideType.CHANGE or name not in groups:
                continue
            if name == ENGINE_KEY and engine is not None:
                continue
            kept.append(override.input_line)
        if engine is not None:
            kept.append(f"{ENGINE_KEY}={engine}")
        return kept

    def _key_set(self, engine: str | None) -> frozenset[str]:
        overrides = self._group_overrides(engine)
        if self.command.config_dir:
            overrides.append(f"hydra.searchpath=[file://{self.command.config_dir}]")
        return _composed_key_set(self.command.config_name, tuple(overrides))

    def keys_for(self, engine: str) -> set[str]:
        if engine not in self._keys:
            self._keys[engine] = {k for k in self._key_set(engine) if "=" not in k}
        return self._keys[engine]

    def closest(self, key: str) -> str | None:
        keys = self.keys_for(self.engine)
        parent = key.rpartition(".")[0]
        siblings = [k for k in keys if k.rpartition(".")[0] == parent]
        for pool in (siblings, keys, list(keys) + self.groups):
            close = difflib.get_close_matches(key, pool, n=1, cutoff=0.75)
            if close:
                return close[0]
        return None


@lru_cache(maxsize=16)
def _composed_key_set(config_name: str, overrides: tuple[str, ...]) -> frozenset[str]:
    """Every key path of the composition (plus ``model_engine=<value>``); empty if it fails too.

    Cached: the error path of a long-lived process (a notebook, the test suite) asks for the same
    few compositions again and again, and the answer only words a suggestion.
    """
    from verl_roles.hydra_context import compose_raw

    try:
        cfg = compose_raw(config_name, list(overrides))
    except Exception:  # noqa: BLE001 - best effort: without a key set we just give no suggestion
        return frozenset()
    return frozenset([*_all_keys(cfg), f"{ENGINE_KEY}={cfg.get(ENGINE_KEY, DEFAULT_ENGINE)}"])


def _all_keys(cfg: DictConfig, prefix: str = "") -> Iterable[str]:
    for key in cfg:
        path = f"{prefix}{key}"
        yield path
        node = cfg._get_node(key)
        if isinstance(node, DictConfig) and not node._is_missing() and not node._is_interpolation():
            yield from _all_keys(node, path + ".")


def _group_names(command: CommandLine) -> list[str]:
    """Every config group a command line can switch (``model_engine``, ``role/critic``, ...)."""
    return list(_group_names_of(command.config_name))


@lru_cache(maxsize=4)
def _group_names_of(config_name: str) -> tuple[str, ...]:
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from verl_roles.hydra_context import isolated_hydra

    try:
        with isolated_hydra():
            loader = GlobalHydra.instance().config_loader()
            defaults = loader.compute_defaults_list(config_name, [], RunMode.RUN)
            choices = defaults.overrides.known_choices
    except Exception:  # noqa: BLE001 - best effort, only used to word a suggestion
        return (ENGINE_KEY,)
    names = {name.partition("@")[0] for name in choices if not name.startswith("hydra/")}
    return tuple(sorted(names))
