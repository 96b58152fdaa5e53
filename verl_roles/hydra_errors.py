"""Turn Hydra, OmegaConf and YAML errors into our :class:`ConfigError`, worded so a user can act on it.

Only runs when composition already failed, so the extra work it does (composing the config once more
to learn the real key set for "did you mean") never slows down a config that composes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache
from typing import NoReturn

import yaml
from hydra.core.override_parser.types import OverrideType
from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig
from omegaconf.errors import InterpolationKeyError, OmegaConfBaseException

from verl_roles.cli_errors import one_paragraph
from verl_roles.cmdline import CommandLine
from verl_roles.errors import ConfigError, Problem, config_files_origin
from verl_roles.layout import DEFAULT_ENGINE, ENGINE_KEY, ENGINES

LIBRARY_ERRORS = (ConfigCompositionException, OmegaConfBaseException, OverrideParseException, yaml.YAMLError)


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
        value = override.value_element_text() if override is not None else "VALUE"
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
        overrides = tuple(self._group_overrides(engine))
        return _composed_key_set(self.command.config_name, overrides, self.command.config_dir_path())

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
def _composed_key_set(config_name: str, overrides: tuple[str, ...], config_dir: str | None) -> frozenset[str]:
    """Every key path of the composition (plus ``model_engine=<value>``); empty if it fails too.

    Cached: the error path of a long-lived process (a notebook, the test suite) asks for the same
    few compositions again and again, and the answer only words a suggestion.
    """
    from verl_roles.hydra_context import compose_raw

    try:
        cfg = compose_raw(config_name, list(overrides), config_dir)
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
