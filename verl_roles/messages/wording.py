"""Turn Hydra, OmegaConf and YAML errors into our :class:`ConfigError`, worded so a user can act on it.

Reads the one :class:`~verl_roles.inputs.cmdline.CommandLine` (which override set a key, which engine was
asked for). For "did you mean" it needs the real key set of the user's composition: the caller, which
can compose, passes ``key_paths`` (:func:`verl_roles.hydra_adapter.loader.composed_key_paths`); this
module never composes. Only runs when composition already failed, so that extra work never slows down
a config that composes.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import NoReturn

import yaml
from hydra.core.override_parser.types import OverrideType
from hydra.errors import (
    ConfigCompositionException,
    MissingConfigException,
    OverrideParseException,
    SearchPathException,
)
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    GrammarParseError,
    InterpolationKeyError,
    InterpolationResolutionError,
    OmegaConfBaseException,
    UnsupportedInterpolationType,
)

from verl_roles.base import releases
from verl_roles.base.errors import (
    INVISIBLE,
    ConfigError,
    Problem,
    config_files_origin,
    did_you_mean,
    one_paragraph,
    shell_line,
    unknown_key,
    yaml_problem,
)
from verl_roles.base.layout import DEFAULT_ENGINE, ENGINE_ALIASES, ENGINE_KEY, ENGINES, SELECTABLE_GROUPS
from verl_roles.base.releases import DEFAULT_RELEASE, VERSION_KEY, is_supported
from verl_roles.base.suggest import LOOSE, folded, near_keys, near_names
from verl_roles.compat import messages as texts
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.config_tree import is_internal_group
from verl_roles.legacy import find as find_legacy
from verl_roles.legacy import renamed_between
from verl_roles.messages.library_messages import innermost_problem, known_problem
from verl_roles.omegaconf_adapter.override_text import element_text
from verl_roles.upstream.passed_on import passed_on
from verl_roles.upstream.verl_differences import ENGINES_NOT_OFFERED
from verl_roles.validation.schema import declared_types, verl_names

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
#
# Matched by exception class and attribute (``full_key``, ``missing_cfg_file``, ``options``, the cause
# Hydra chains) wherever Hydra and OmegaConf give them. A regex reads a message only where the library
# has nothing typed for what we need; each says so.

# (Each library text we read is a pattern of verl_roles.compat.messages, with what carries it.)


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from (Hydra wraps OmegaConf's), outermost first."""
    chain: list[BaseException] = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__
    return chain


def _of_type(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    return next((link for link in _chain(error) if isinstance(link, kind)), None)


def _problems(error: BaseException, command: CommandLine, key_paths: KeyPaths | None) -> Iterable[Problem]:
    text = one_paragraph(str(error))
    if isinstance(error, yaml.YAMLError):
        yield yaml_problem(error)
    elif isinstance(error, OverrideParseException):
        yield override_grammar_problem(error.override, one_paragraph(error.message), command, key_paths)
    elif isinstance(error, MissingConfigException):
        yield _missing_config_problem(error, command, text)
    elif isinstance(error, SearchPathException):
        shown = os.path.abspath(command.config_dir) if command.config_dir else "the folder"
        yield Problem(key="--config-dir", message=f"{shown} is not a folder",
                      fix="pass the folder that holds your config files (it must exist)")
    elif (key := _not_in_struct(error, command)) is not None:
        yield _unknown_key_problem(key, command, key_paths)
    elif match := texts.GROUP_NOT_PLACED.search(text):
        yield _unknown_key_problem(match.group(1), command, key_paths)
    elif match := texts.ALREADY_THERE.search(text):
        key = match.group(1)
        value = value_typed_for(key, command)
        yield Problem(
            key=key,
            message="already exists, so `+` (which adds a new key) does not apply",
            origin=command.origin_of(key),
            fix=f"drop the `+`: write `{key}={value}` (or `++{key}={value}` to add-or-override)",
        )
    elif match := texts.NOTHING_TO_DELETE.search(text):
        key = match.group(1)
        yield unknown_key(key, because=f"`~{key}` has nothing to delete", origin=command.origin_of(key),
                          fix=f"drop the `~{key}` override (`verl-roles keys` lists the keys)")
    elif (interpolation := _of_type(error, InterpolationKeyError)) is not None:
        yield _interpolation_problem(interpolation, command, key_paths)
    elif (resolution := _of_type(error, InterpolationResolutionError)) is not None:
        yield _resolution_problem(resolution, command)
    elif (grammar := _of_type(error, GrammarParseError)) is not None:
        detail = str(getattr(grammar, "msg", "") or grammar).splitlines()[0]
        message = f"holds an interpolation that does not parse ({detail})"
        yield _at_key(grammar, command, message, _GRAMMAR_FIX)
    elif (known := known_problem(error, command)) is not None:
        yield known
    else:
        yield innermost_problem(_chain(error), command)


def _not_in_struct(error: BaseException, command: CommandLine) -> str | None:
    """The key of the override Hydra could not apply because the config has no such key ("not in
    struct"): Hydra chains OmegaConf's ConfigAttributeError / ConfigKeyError, whose ``full_key`` is the
    first part of the typed key that does not exist; the override typed is the one that reaches it."""
    if not isinstance(error, ConfigCompositionException):
        return None
    cause = error.__cause__
    if not isinstance(cause, ConfigAttributeError | ConfigKeyError) or not getattr(cause, "full_key", None):
        return None
    missing = str(cause.full_key)
    typed = [o.key for o in command.key_overrides() if o.key == missing or o.key.startswith(f"{missing}.")]
    return typed[-1] if typed else missing


def _missing_config_problem(error: MissingConfigException, command: CommandLine, text: str) -> Problem:
    if error.options is not None and error.missing_cfg_file:
        return _missing_option_problem(error, command)
    if str(error.missing_cfg_file).removesuffix(".yaml") == command.config_name:
        return Problem(
            key="--config-name",
            message=f"names no primary config: {error.missing_cfg_file!r} is neither in conf/ nor in your "
            "--config-dir",
            fix="use `--config-name ppo_trainer` (the default) or the name of a config file of your "
            "--config-dir",
            origin=command.origin_of("--config-name"),
        )
    match = texts.DEFAULTS_OF.search(text)
    return Problem(
        key=f"{match.group(1)}.yaml" if match else "a defaults list",
        message=f"its defaults list names `{error.missing_cfg_file}`, which is no config of conf/ or of your "
        "--config-dir",
        fix="name an existing option of the group in the defaults list, or remove that entry",
    )


_GRAMMAR_FIX = "fix its syntax: `${key}`, or `${resolver:arg}` with string arguments quoted"


def _resolution_problem(error: BaseException, command: CommandLine) -> Problem:
    """An interpolation OmegaConf could not resolve (its ``full_key`` is the key that holds it)."""
    text = one_paragraph(str(getattr(error, "msg", None) or error))
    if isinstance(error, UnsupportedInterpolationType):
        match = texts.RESOLVER.search(text)
        name = match.group(1) if match else "?"
        return _at_key(error, command, f"uses the resolver `{name}`, which does not exist",
                       "use a resolver OmegaConf or Hydra registers (oc.env, oc.select, oc.decode, "
                       "oc.create, now, ...), or a plain `${key}` reference")
    if texts.RECURSIVE.search(text):
        return _at_key(error, command, "refers to itself, directly or through the keys it refers to",
                       "give one of those keys a plain value, or point the interpolation at a key that does "
                       "not lead back")
    if match := texts.RESOLVER_GRAMMAR.search(text):
        return _at_key(error, command, f"holds an interpolation that does not parse ({match.group(1)})",
                       _GRAMMAR_FIX)
    if match := texts.ENV_UNSET.search(text):
        name = match.group(1)
        return _at_key(error, command, f"reads the environment variable {name}, which is not set",
                       f"export {name} before the run, or give a default: `${{oc.env:{name},DEFAULT}}`")
    if texts.HYDRA_RESOLVER.search(text):
        return _at_key(error, command, "uses Hydra's `${hydra:...}` resolver, which only a running Hydra "
                       "job answers; verl_roles resolves the config before Hydra runs (verl reads it "
                       "resolved)",
                       "write the value itself, or refer to a key of the config (`${trainer.project_name}`)")
    key = str(getattr(error, "full_key", None) or "config")
    message = one_paragraph(texts.without_key_suffix(text))
    origin = command.origin_of(key) or _typed_interpolations(command, key)
    return Problem(key=key, message=message, origin=origin,
                   fix=f"check the interpolation of {key}: `${{key}}` or `${{resolver:arg}}` giving a value "
                   "of the key's type")


def _at_key(error: BaseException, command: CommandLine, message: str, fix: str) -> Problem:
    """A problem of the value at the error's ``full_key``, and where that value came from."""
    key = str(getattr(error, "full_key", None) or "config")
    return Problem(key=key, message=message, fix=fix,
                   origin=command.origin_of(key) or _typed_interpolations(command, key))


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
            message=f"has no option {option!r}: the {option} engine of {shipping} is not one verl_roles "
            f"offers ({ENGINES_NOT_OFFERED[option]})",
            expected="one of " + ", ".join(options) if options else "",
            origin=command.origin_of(group),
            fix="run it with verl's own config (python -m verl.trainer.main_ppo), or pick one of "
            f"{', '.join(options)}",
        )
    close = [f"{group}={guess}" for guess in near_names(option, options, cutoff=LOOSE)]
    fix = did_you_mean(close) or (f"pick one, e.g. `{group}={options[0]}`" if options else "")
    return Problem(
        key=group,
        message=f"has no option {option!r}",
        expected="one of " + ", ".join(options) if options else "",
        origin=command.origin_of(group),
        fix=fix,
    )


def override_grammar_problem(override: str | None, detail: str, command: CommandLine,
                             key_paths: KeyPaths | None = None) -> Problem:
    """An argument Hydra's override grammar refuses (``detail``: what the parser said, if anything): a
    key holding a character no key has is named so; anything else gets the grammar's own words."""
    lookalike = _lookalike_key_problem(override, command, key_paths)
    if lookalike is not None:
        return lookalike
    return Problem(
        key=f"`{override}`" if override else "command line",
        message="is not a valid Hydra override" + (f": {detail}" if detail else ""),
        fix="write KEY=VALUE and quote values with spaces or brackets, e.g. `'key=[a,b]'` "
        "(grammar: https://hydra.cc/docs/advanced/override_grammar/basic/)",
    )


def value_typed_for(key: str, command: CommandLine) -> str:
    """The value the command line gave ``key``, as override text: the override's own value, or, when the
    override set a mapping holding ``key`` (``optim.override_optimizer_config={adam_beta1:0.8}``), the
    value inside it (``0.8``), so a fix that writes ``+KEY=VALUE`` sets what was meant; ``VALUE`` when
    the command line did not set it."""
    override = command.override_for(key)
    if override is None:
        return "VALUE"
    if override.key == key:
        return override.value_element_text()
    value = override.value()
    for part in key[len(override.key) + 1:].split("."):
        if not isinstance(value, dict) or part not in value:
            return override.value_element_text()
        value = value[part]
    return element_text(value)


def _ascii_lookalike(char: str) -> str:
    """The ASCII letter or digit ``char`` is drawn like (``о``, CYRILLIC SMALL LETTER O -> ``o``), "" for
    an invisible character, else ``char`` itself."""
    if INVISIBLE.match(char) or unicodedata.category(char) == "Cf":
        return ""
    name = unicodedata.name(char, "")
    last = name.rpartition(" ")[2]
    if (" LETTER " in name or " DIGIT " in name) and len(last) == 1 and last.isascii() and last.isalnum():
        return last.lower() if "SMALL" in name or "LETTER" not in name else last.upper()
    folded = unicodedata.normalize("NFKC", char)
    return folded if folded.isascii() else char


def _lookalike_key_problem(override: str | None, command: CommandLine,
                           key_paths: KeyPaths | None) -> Problem | None:
    """A key of ``override`` that Hydra's grammar refuses because it holds a character that is not ASCII:
    each such character named by its code point and name (a letter of another script drawn like a Latin
    one, a zero-width character nobody sees), and the key meant when it is one of the config's."""
    if not override:
        return None
    head, sep, value = override.partition("=")
    key = head.lstrip("+~")
    if not sep or key.isascii():
        return None
    odd = [(index, char) for index, char in enumerate(key) if not char.isascii()]
    named = "; ".join(
        f"U+{ord(char):04X} ({unicodedata.name(char, 'unnamed').lower()}) at position {index + 1}"
        for index, char in odd)
    meant = "".join(_ascii_lookalike(char) if not char.isascii() else char for char in key)
    prefix = head[: len(head) - len(key)]
    knowledge = KeyKnowledge(command, key_paths) if meant.isascii() else None
    if knowledge is not None and meant in knowledge.keys_for(knowledge.engine):
        fix = f"did you mean `{shell_line([f'{prefix}{meant}={value}'])}`? Retype the key in ASCII"
    else:
        fix = ("retype the key in ASCII letters, digits, `_` and `.` (`verl-roles keys PATTERN` lists the "
               "keys)")
    return Problem(
        key=key, message=f"holds {'characters' if len(odd) > 1 else 'a character'} a key never has: {named}; "
        "a key is ASCII letters, digits, `_` and `.`, so Hydra's grammar refuses the override",
        origin=f"the command line override `{override}`", fix=fix,
    )


def _unknown_key_problem(key: str, command: CommandLine, key_paths: KeyPaths | None) -> Problem:
    override = command.override_for(key)
    value = value_typed_for(key, command)
    origin = command.origin_of(key)
    leaf = key.rsplit(".", 1)[-1]
    if leaf == ENGINE_KEY and key != ENGINE_KEY:
        return unknown_key(
            key, f"`{key.rpartition('.')[0]}`",
            because="the training engine is chosen once, by the top-level group `model_engine`",
            origin=origin, fix=f"write `model_engine={value}` (it switches actor, ref and critic together)",
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
    section, _, name = key.rpartition(".")
    handed = passed_on(section)
    accepted = verl_names(handed.parameters, release) if handed is not None and handed.parameters else ()
    if handed is not None and (not accepted or name in accepted):
        takes = f", which takes `{name}`" if accepted else " as it is"
        return Problem(
            key=key, origin=origin,
            message=f"is not set in the config, so it cannot be changed; verl passes `{section}` to "
            f"{handed.library} as {handed.call}{takes}",
            fix=f"add it: write `+{key}={value}`",
        )
    elsewhere = releases.elsewhere_problem_text(key, release, command.chose(releases.VERSION_KEY))
    if elsewhere is not None:
        return Problem(key=key, message=elsewhere[0], origin=origin, fix=elsewhere[1])
    guesses = ([f"{section}.{near}" for near in near_names(name, accepted)] if accepted else
               knowledge.suggestions(key, override.value() if override is not None else None))
    present = knowledge.keys_for(knowledge.engine)
    return unknown_key(
        key, because='Hydra says "not in struct"', guesses=guesses,
        write=lambda guess: f"{'' if guess in present else '+'}{guess}={value}",
        fix=(f"`verl-roles keys '{section}.*'` lists what {handed.call.partition('(')[0]} takes"
             if accepted and handed is not None else "" if any(folded(g) == folded(key) for g in guesses)
             else f"if you mean to add a new key, write `+{key}={value}`"),
        origin=origin,
    )


# Rerun(key, release, engine): the command the user typed, for ``key``, on ``release`` (None: as the line
# chose) and with ``engine`` (None: as the line chose).
Rerun = Callable[[str, "str | None", "str | None"], str]


def rerun_line(name: str, command: CommandLine) -> Rerun:
    """``verl-roles NAME KEY`` with the arguments of ``command``, on another release or engine when one is
    named (the line's own choice of it replaced)."""

    def rerun(key: str, release: str | None = None, engine: str | None = None) -> str:
        chosen = {VERSION_KEY: release, ENGINE_KEY: engine}
        line = command.rewritten(lambda o: [] if o.is_group and chosen.get(o.key) is not None else None)
        added = [f"{group}={option}" for group, option in chosen.items() if option is not None]
        return shell_line(["verl-roles", name, key, *line.argv(), *added])

    return rerun


def _engine_for(key: str, release: str, current: str) -> str | None:
    """The engine to choose to see ``key`` in ``release``'s config: None when ``current`` has it (or the
    release declares it for every engine), else the first engine of ours that has it there."""
    declared = releases.reference(release).get("types", {}).get(key)
    if not isinstance(declared, dict) or current in declared:
        return None
    return next((engine for engine in declared if releases.ships(release, engine)), None)


def other_release_problem(key: str, command: CommandLine, rerun: Rerun) -> Problem | None:
    """For a view of one key (``explain KEY``, ``keys KEY``): ``key`` is no key of the release ``command``
    composes, and the release data knows it: a name another release gives a key this one names otherwise
    (a rename, either direction, as ``verl-roles diff`` pairs and ``migrate`` rewrites it) or a legacy
    name of the table, then the key this release has; or a key of other releases only, then which, and
    the same command on the newest of them. None when no release has anything to say about ``key``."""
    release = command.release()
    if releases.has_key(release, key):
        return None
    others = releases.only_elsewhere(key, release)
    spelled = next((hit[1] for r in others if (hit := renamed_between(key, r, release)) is not None), None)
    if spelled is None and (hit := find_legacy(key, release)) is not None and not hit[0].alias:
        spelled = hit[1]
    names = " and ".join(f"verl {r}" for r in others)
    if spelled is not None:
        whose = (f"verl {others[0]}'s name" if len(others) == 1 else f"the name {names} use" if others
                 else "a legacy name")
        fix = f"`{rerun(spelled, None, None)}`"
        if others:
            engine = _engine_for(key, others[-1], command.engine(DEFAULT_ENGINE))
            fix += f"; for the config of verl {others[-1]}: `{rerun(key, others[-1], engine)}`"
        message = f"is {whose} for {spelled}, the key of verl {release} (the release of this config)"
        return Problem(key=key, message=message, fix=fix)
    if not others:
        return None
    how = (f"switch {releases.choice(release)} to" if command.chose(VERSION_KEY) else "add")
    engine = _engine_for(key, others[-1], command.engine(DEFAULT_ENGINE))
    under = f" (with {ENGINE_KEY}={engine}: verl {others[-1]} has it under that engine)" if engine else ""
    return Problem(key=key, message=f"is a key of {names} only; this config is written for verl {release}, "
                   "which has no such key",
                   fix=f"{how} `{releases.choice(others[-1])}` to see verl {others[-1]}'s{under}: "
                   f"`{rerun(key, others[-1], engine)}`")


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
    close = [f"{guess}={value}" for guess in near_names(key, groups, cutoff=LOOSE)]
    fix = did_you_mean(close) or "use one of the config groups"
    return Problem(key=key, message="is not a config group", expected="one of " + ", ".join(groups),
                   origin=origin, fix=fix)


def _interpolation_problem(error: BaseException, command: CommandLine, key_paths: KeyPaths | None) -> Problem:
    key = str(getattr(error, "full_key", None) or "config")
    match = texts.INTERPOLATION_KEY.search(str(error))
    target = match.group(1) if match else "?"
    guess = KeyKnowledge(command, key_paths).closest(target)
    return unknown_key(
        f"${{{target}}}", referred_by=key, guesses=[f"${{{guess}}}"] if guess else [],
        fix="" if guess else "point it at an existing key",
        origin=command.origin_of(key) or _typed_interpolations(command, key),
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
        """The keys the user may have meant by ``key`` (:func:`verl_roles.base.suggest.near_keys`), of a type
        that accepts the typed ``value`` when it is given; else the group a misspelt group choice meant
        (``model_enginez=megatron``: only the groups a user chooses)."""
        types = declared_types(self.engine, self.release)

        def fits(candidate: str) -> bool:
            declared = types.get(candidate)
            return value is None or declared is None or declared.accepts(value)

        return near_keys(key, self.keys_for(self.engine), fits) or near_names(key, self.groups)
