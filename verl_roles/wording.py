"""Turn Hydra, OmegaConf and YAML errors into our :class:`ConfigError`, worded so a user can act on it.

Reads the one :class:`~verl_roles.cmdline.CommandLine` (which override set a key, which engine was
asked for). For "did you mean" it needs the real key set of the user's composition: the caller, which
can compose, passes ``key_paths`` (:func:`verl_roles.hydra_adapter.loader.composed_key_paths`); this
module never composes. Only runs when composition already failed, so that extra work never slows down
a config that composes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import NoReturn

import yaml
from hydra.core.override_parser.types import OverrideType
from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
from omegaconf.errors import InterpolationKeyError, OmegaConfBaseException

from verl_roles.cmdline import CommandLine
from verl_roles.errors import ConfigError, Problem, config_files_origin, one_paragraph, yaml_problem
from verl_roles.layout import DEFAULT_ENGINE, ENGINE_KEY, ENGINES

LIBRARY_ERRORS = (ConfigCompositionException, OmegaConfBaseException, OverrideParseException, yaml.YAMLError)

# (config name, group overrides, absolute config dir) -> every key path of that composition, plus
# `model_engine=<engine>`; empty when it does not compose.
KeyPaths = Callable[[str, tuple[str, ...], str | None], frozenset[str]]


def translate(error: BaseException, command: CommandLine, key_paths: KeyPaths | None = None) -> ConfigError:
    """Our ConfigError for a library ``error`` raised while composing ``command`` (``key_paths``
    lets it suggest the key meant; without it there is no "did you mean")."""
    if isinstance(error, ConfigError):
        return with_origins(error, command)
    problems = list(_problems(error, command, key_paths))
    return ConfigError(problems)


def raise_translated(
    error: BaseException, command: CommandLine, key_paths: KeyPaths | None = None
) -> NoReturn:
    """Raise :func:`translate` of ``error``, chained to the original for ``--debug``."""
    translated = translate(error, command, key_paths)
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


def _problems(error: BaseException, command: CommandLine, key_paths: KeyPaths | None) -> Iterable[Problem]:
    text = str(error)
    if isinstance(error, yaml.YAMLError):
        yield yaml_problem(error)
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
        yield _unknown_key_problem(match.group(1), command, key_paths)
    elif match := _ALREADY_THERE.search(text):
        key = match.group(1)
        override = command.override_for(key)
        value = override.value_element_text() if override is not None else "VALUE"
        yield Problem(
            key=key,
            message="already exists, so `+` (which adds a new key) does not apply",
            origin=command.origin_of(key),
            fix=f"drop the `+`: write `{key}={value}` (or `++{key}={value}` to add-or-override)",
        )
    elif isinstance(error, InterpolationKeyError) or _INTERPOLATION_KEY.search(text):
        yield _interpolation_problem(error, command, key_paths)
    else:
        key = getattr(error, "full_key", None) or "config"
        message = getattr(error, "msg", None) or text
        yield Problem(key=key, message=one_paragraph(message), origin=command.origin_of(key) if key else "")


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


def _unknown_key_problem(key: str, command: CommandLine, key_paths: KeyPaths | None) -> Problem:
    override = command.override_for(key)
    value = override.value_element_text() if override is not None else "VALUE"
    origin = command.origin_of(key)
    leaf = key.rsplit(".", 1)[-1]
    if leaf == ENGINE_KEY and key != ENGINE_KEY:
        return Problem(
            key=key,
            message="is not a key: the training engine is chosen once, by the top-level group `model_engine`",
            origin=origin,
            fix=f"write `model_engine={value}` (it switches actor, ref and critic together)",
        )
    knowledge = KeyKnowledge(command, key_paths)
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


def _interpolation_problem(error: BaseException, command: CommandLine, key_paths: KeyPaths | None) -> Problem:
    key = getattr(error, "full_key", None) or "config"
    match = _INTERPOLATION_KEY.search(str(error))
    target = match.group(1) if match else "?"
    guess = KeyKnowledge(command, key_paths).closest(target)
    fix = f"did you mean `${{{guess}}}`?" if guess else "point it at an existing key"
    return Problem(
        key=key,
        message=f"refers to `${{{target}}}`, which is not a key of the config",
        origin=command.origin_of(key),
        fix=fix,
    )


class KeyKnowledge:
    """The real key set of the user's composition, learned from ``key_paths`` on the error path.

    Only the group choices of the command line are kept (those decide which keys exist); value
    overrides are left out, since one of them is what failed.
    """

    def __init__(self, command: CommandLine, key_paths: KeyPaths | None = None):
        self.command = command
        self.key_paths = key_paths
        self._keys: dict[str, set[str]] = {}
        self._groups: list[str] | None = None
        base = self._key_set(engine=None)
        chosen = (k.partition("=")[2] for k in base if k.startswith(f"{ENGINE_KEY}="))
        default_engine = next(chosen, DEFAULT_ENGINE)
        self.engine = command.engine(default_engine)
        self._keys[self.engine] = {k for k in base if "=" not in k}

    @property
    def groups(self) -> list[str]:
        """Every config group a command line can switch (``model_engine``, ``role/critic``, ...)."""
        if self._groups is None:
            self._groups = self.command.tree.groups_with_options()
        return self._groups

    def _group_overrides(self, engine: str | None) -> list[str]:
        kept = [
            o.text
            for o in self.command.group_overrides()
            if o.type == OverrideType.CHANGE and not o.is_sweep and not (engine and o.key == ENGINE_KEY)
        ]
        if engine is not None:
            kept.append(f"{ENGINE_KEY}={engine}")
        return kept

    def _key_set(self, engine: str | None) -> frozenset[str]:
        if self.key_paths is None:
            return frozenset()
        overrides = tuple(self._group_overrides(engine))
        return self.key_paths(self.command.config_name, overrides, self.command.config_dir_path())

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
