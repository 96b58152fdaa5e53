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

from verl_roles import releases
from verl_roles.cmdline import CommandLine
from verl_roles.config_tree import is_internal_group
from verl_roles.errors import ConfigError, Problem, config_files_origin, one_paragraph, yaml_problem
from verl_roles.layout import DEFAULT_ENGINE, ENGINE_ALIASES, ENGINE_KEY, ENGINES, SELECTABLE_GROUPS
from verl_roles.releases import DEFAULT_RELEASE, VERSION_KEY, is_supported
from verl_roles.schema import declared_types
from verl_roles.suggest import is_near, near_names
from verl_roles.verl_differences import ENGINES_NOT_OFFERED

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
    elif (known := _known_message_problem(error, command, key_paths)) is not None:
        yield known
    else:
        key = getattr(error, "full_key", None) or "config"
        message = getattr(error, "msg", None) or text
        yield Problem(key=key, message=one_paragraph(message), origin=command.origin_of(key) if key else "")


# Hydra and OmegaConf messages whose wording we replace: (pattern, what is wrong, the fix). In the
# texts, {0}, {1}... are the pattern's groups, {key} the key the error names.
_KNOWN_MESSAGES: tuple[tuple[re.Pattern[str], str, str, str], ...] = (
    (re.compile(r"Cannot find primary config '([^']*)'"), "--config-name",
     "names no primary config: {0!r} is neither in conf/ nor in your --config-dir",
     "use `--config-name ppo_trainer` (the default) or the name of a config file of your --config-dir"),
    (re.compile(r"In '([^']+)': Could not load '([^']+)'"), "{0}.yaml",
     "its defaults list names `{1}`, which is no config of conf/ or of your --config-dir",
     "name an existing option of the group in the defaults list, or remove that entry"),
    (re.compile(r"Could not delete from config\. '([^']+)' does not exist"), "{0}",
     "is not a key of the config, so `~{0}` has nothing to delete",
     "drop the `~{0}` override (`verl-roles keys` lists the keys)"),
    (re.compile(r"Additional config directory '([^']+)' not found"), "--config-dir",
     "{0} is not a folder", "pass the folder that holds your config files (it must exist)"),
    (re.compile(r"Recursive interpolation detected"), "{key}",
     "refers to itself, directly or through the keys it refers to",
     "give one of those keys a plain value, or point the interpolation at a key that does not lead back"),
    (re.compile(r"Environment variable '([^']+)' not found"), "{key}",
     "reads the environment variable {0}, which is not set",
     "export {0} before the run, or give a default: `${{oc.env:{0},DEFAULT}}`"),
    (re.compile(r"Unsupported interpolation type (\S+)"), "{key}",
     "uses the resolver `{0}`, which does not exist",
     "use a resolver OmegaConf or Hydra registers (oc.env, oc.select, oc.decode, oc.create, now, ...), "
     "or a plain `${{key}}` reference"),
    (re.compile(r"GrammarParseError raised while resolving interpolation: (.*?)(?: full_key:|$)"), "{key}",
     "holds an interpolation that does not parse ({0})",
     "fix its syntax: `${{key}}`, or `${{resolver:arg}}` with string arguments quoted"),
)


def _known_message_problem(
    error: BaseException, command: CommandLine, key_paths: KeyPaths | None
) -> Problem | None:
    text = one_paragraph(str(error))
    for pattern, key_text, message, fix in _KNOWN_MESSAGES:
        match = pattern.search(text)
        if match is None:
            continue
        full_key = str(getattr(error, "full_key", None) or "config")
        groups = match.groups()
        key = key_text.format(*groups, key=full_key)
        origin = command.origin_of(key) or _typed_interpolations(command, key)
        return Problem(key=key, message=message.format(*groups, key=key), fix=fix.format(*groups, key=key),
                       origin=origin)
    return None


def _typed_interpolations(command: CommandLine, key: str) -> str:
    """For an interpolation error at a key the command line did not set: the overrides that typed an
    interpolation (the error surfaces where a key refers to the broken one, not where it was typed)."""
    typed = [o for o in command.task_overrides if "${" in (o.value_text or "")]
    if not typed or key in ("config", "--config-name", "--config-dir"):
        return ""
    shown = ", ".join(f"`{o.text}`" for o in typed[:3])
    return f"the interpolation typed on the command line ({shown}), which {key} refers to"


def _missing_option_problem(error: MissingConfigException, command: CommandLine) -> Problem:
    group, _, option = str(error.missing_cfg_file).rpartition("/")
    if is_internal_group(group):
        return _internal_group_problem(group, option, command.origin_of(group), command)
    options = sorted(str(o) for o in error.options or ())
    if group == ENGINE_KEY and option in ENGINES_NOT_OFFERED:
        shipping = " and ".join(f"verl {r}" for r in releases.with_engine(option)) or "verl"
        return Problem(
            key=group,
            message=f"has no option {option!r}: the {option} engine of {shipping} is not one verl_roles offers "
            f"({ENGINES_NOT_OFFERED[option]})",
            expected="one of " + ", ".join(options) if options else "",
            origin=command.origin_of(group),
            fix=f"run it with verl's own config (python -m verl.trainer.main_ppo), or pick one of {', '.join(options)}",
        )
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
    if is_internal_group(key):
        return _internal_group_problem(key, value, origin, command)
    knowledge = KeyKnowledge(command, key_paths)
    if "/" in key:
        return _unknown_group_problem(key, value, origin, knowledge)
    engine_only = engine_only_problem(key, command, knowledge, origin)
    if engine_only is not None:
        return engine_only
    release = command.release()
    elsewhere = releases.elsewhere_problem_text(key, release, command.chose(releases.VERSION_KEY))
    if elsewhere is not None:
        return Problem(key=key, message=elsewhere[0], origin=origin, fix=elsewhere[1])
    guesses = knowledge.suggestions(key, override.value() if override is not None else None)
    if len(guesses) == 1:
        fix = f"did you mean `{guesses[0]}`? Write `{guesses[0]}={value}`; "
    elif guesses:
        choices = " or ".join(f"`{guess}={value}`" for guess in guesses)
        fix = f"did you mean one of these keys? Write {choices}; "
    else:
        fix = ""
    fix += f"if you mean to add a new key, write `+{key}={value}`"
    message = 'is not a key of the config (Hydra says "not in struct")'
    return Problem(key=key, message=message, origin=origin, fix=fix)


def engine_only_problem(
    key: str, command: CommandLine, knowledge: KeyKnowledge, origin: str
) -> Problem | None:
    """A key that exists only under another engine than the one ``command`` composes, worded for how the
    command line chose that engine: not at all (add it), explicitly (switch it), or by a sweep (whose
    own config, and every job, gets the keys that are not swept)."""
    current = knowledge.engine
    engine = knowledge.only_under(key)
    if engine is None:
        return None
    message = f"exists only with model_engine={engine}; the config was composed with model_engine={current}"
    swept = [o for o in command.group_overrides() if o.key == ENGINE_KEY and o.is_sweep]
    override = command.override_for(key)
    typed = f"`{override.text}`" if override is not None else f"`{key}=...`"
    if swept:
        message += (
            f". The sweep `{swept[-1].text}` runs both engines, and an override that is not swept is part of "
            f"every job and of the sweep's own config (which Hydra composes with model_engine={current})"
        )
        fix = (
            f"run one sweep per engine: `-m model_engine={engine} {typed.strip('`')} ...` for {engine}, and "
            f"the other engine's sweep without {typed}"
        )
    elif command.chose(ENGINE_KEY):
        fix = (
            f"the command line chose model_engine={current}: switch it to model_engine={engine}, or drop "
            f"{typed} (the {current} engine has no such key)"
        )
    else:
        fix = f"add `model_engine={engine}` to the command line"
    return Problem(key=key, message=message, origin=origin, fix=fix)


def _internal_group_problem(key: str, value: str, origin: str, command: CommandLine) -> Problem:
    """``actor=megatron``: a folder of conf/ the engine and role options mount, not a command-line choice."""
    chosen = ", ".join(command.tree.selectable_groups())
    message = (
        f"is an internal config group (files the engine and role options mount), not a choice of the "
        f"command line; the groups you choose are {chosen}"
    )
    engine = ENGINE_ALIASES.get(value, value)
    if engine in ENGINES:
        fix = f"the engine is chosen for every role at once: write `model_engine={value}`"
    elif f"role/{key}" in SELECTABLE_GROUPS:
        fix = (
            f"a {key} option of yours is chosen with `role/{key}={value}` (a file role/{key}/{value}.yaml in "
            f"your --config-dir); single keys are set with KEY=VALUE (`verl-roles keys {key}` lists them)"
        )
    else:
        fix = f"set single keys with KEY=VALUE instead (`verl-roles keys '*{key}*'` lists them)"
    return Problem(key=key, message=message, origin=origin, fix=fix)


def _unknown_group_problem(key: str, value: str, origin: str, knowledge: KeyKnowledge) -> Problem:
    groups = knowledge.groups
    close = [g for g in difflib.get_close_matches(key, groups, n=2) if g != key]
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
        chosen = command.group_choices().get(VERSION_KEY)
        self.release = chosen if is_supported(chosen) else DEFAULT_RELEASE
        self._keys[self.engine] = {k for k in base if "=" not in k}

    @property
    def groups(self) -> list[str]:
        """Every config group a command line chooses an option of (``model_engine``, ``role/critic``, and
        a ``--config-dir``'s own groups); internal groups are never offered."""
        if self._groups is None:
            self._groups = list(self.command.tree.selectable_groups())
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

    def only_under(self, key: str) -> str | None:
        """The other engine ``key`` exists under, when the composed engine has no such key."""
        if key in self.keys_for(self.engine):
            return None
        return next((e for e in ENGINES if e != self.engine and key in self.keys_for(e)), None)

    def closest(self, key: str, value: object = None) -> str | None:
        """The key the user most likely meant by ``key`` (the first of :meth:`suggestions`), or None."""
        found = self.suggestions(key, value)
        return found[0] if found else None

    def suggestions(self, key: str, value: object = None) -> list[str]:
        """The keys the user may have meant by ``key``: near in name (its last part spelt alike, or
        abbreviated: ``learning_rate`` and ``lr``) and, when the typed ``value`` is given, of a type that
        accepts it. Never ``key`` itself. Same section first; then keys whose path ends like the one
        typed (a path missing its first sections, ``rollout.n`` or ``optim.lr``: every role's key, which
        may be several); then the nearest anywhere."""
        keys = self.keys_for(self.engine)
        parent, _, leaf = key.rpartition(".")
        types = declared_types(self.engine, self.release)

        def fits(candidate: str) -> bool:
            declared = types.get(candidate)
            return value is None or declared is None or declared.accepts(value)

        siblings = [k for k in keys if k.rpartition(".")[0] == parent and k != key and fits(k)]
        by_leaf = next(iter(near_names(leaf, [k.rpartition(".")[2] for k in siblings])), None)
        if by_leaf:
            return [f"{parent}.{by_leaf}" if parent else by_leaf]
        shortened = self._completed_paths(key, keys, fits)
        if shortened:
            return shortened
        anywhere = [k for k in keys if k != key and is_near(leaf, k.rpartition(".")[2]) and fits(k)]
        close = difflib.get_close_matches(key, anywhere, n=1, cutoff=0.6)
        if close:
            return close
        # A misspelt group (`model_enginez=megatron`): only the groups a user chooses.
        groups = [g for g in self.groups if g != key]
        return difflib.get_close_matches(key, groups, n=1, cutoff=0.75)

    @staticmethod
    def _completed_paths(key: str, keys: set[str], fits: Callable[[str], bool]) -> list[str]:
        """Keys that end with the path typed (``rollout.n`` -> ``actor_rollout_ref.rollout.n``), or else
        whose section path ends like the typed one and whose name is near it (``optim.learning_rate`` ->
        each role's ``optim.lr``); sorted, the first :data:`_MAX_SUGGESTIONS`."""
        parent, _, leaf = key.rpartition(".")
        if not parent:
            return []
        exact = sorted(k for k in keys if k.endswith(f".{key}") and fits(k))
        if exact:
            return exact[:_MAX_SUGGESTIONS]
        near = sorted(
            k
            for k in keys
            if k.rpartition(".")[0].endswith(f".{parent}")
            and is_near(leaf, k.rpartition(".")[2])
            and fits(k)
        )
        return near[:_MAX_SUGGESTIONS]


# How many keys ending like a typed path are offered (`verl-roles keys '*.PATH'` lists all of them).
_MAX_SUGGESTIONS = 3
