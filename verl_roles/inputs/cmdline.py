"""The command line, parsed once, with Hydra's own override parser.

Every entry point (``python -m verl_roles.main``, :func:`verl_roles.compose`, ``verl-roles explain``,
``diff``, ``migrate`` and ``export-slime``) turns what the user typed into one :class:`CommandLine`,
and everything that needs to know what was typed reads it: the legacy translation (override values
only, never a flag's value), the roles step (which keys the command line sets, which group options it
chose), and the wording of errors (which override set a key, which engine was asked for).

A command line is a sequence of items in the order typed:

- :class:`Flag`: a Hydra flag (``--config-name NAME``, ``-cn=NAME``, ``--cfg job``, ``-p PKG``,
  ``--info [WHAT]``, ``-m``, ...) or a command's own (``export-slime -o FILE``), with its value. The
  table of Hydra's flags mirrors Hydra's argument parser (``tests/test_cmdline.py`` pins it).
- :class:`Override`: every other argument, parsed by Hydra's ``OverridesParser`` (key or group,
  ``+`` / ``++`` / ``~``, ``@package``, value, sweep). An argument Hydra's grammar rejects is kept with
  its text (Hydra reports it when composing) and split into key and value by its spelling.

An override is a *group choice* when its key names a config group of the search path and its value
is not a dict, exactly the rule Hydra uses to put it into the defaults list; the groups are the
directories of the config tree (:class:`verl_roles.inputs.config_tree.ConfigTree`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override as HydraOverride
from hydra.core.override_parser.types import OverrideType
from hydra.errors import HydraException

from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem, did_you_mean
from verl_roles.base.layout import ENGINE_ALIASES, ENGINE_KEY, PRIMARY_CONFIG
from verl_roles.base.limits import MAX_NESTING, override_nesting_depth
from verl_roles.base.suggest import near_names
from verl_roles.inputs.config_tree import ConfigTree, config_dir_path, is_internal_group
from verl_roles.inputs.flags import (
    CONFIG_DIR,
    CONFIG_NAME,
    CONFIG_PATH,
    HYDRA_FLAGS,
    MULTIRUN,
    REQUIRED,
    Flag,
    FlagSpec,
    split_arguments,
)

# --- overrides ------------------------------------------------------------------------------------

_PREFIX_TYPES = (("++", OverrideType.FORCE_ADD), ("+", OverrideType.ADD), ("~", OverrideType.DEL))


@dataclass(frozen=True)
class Override:
    """One override argument: its text as typed and what Hydra's grammar makes of it.

    ``key`` is the dotted key or the group path (without ``+``/``++``/``~`` and ``@package``);
    ``is_group`` says whether Hydra puts it into the defaults list (a config group, a non-dict value).
    ``parsed`` is Hydra's own parse, or None when the grammar rejects the text.
    """

    text: str
    key: str
    type: OverrideType
    package: str | None
    is_group: bool
    parsed: HydraOverride | None = field(default=None, compare=False, repr=False)

    @property
    def value_text(self) -> str | None:
        """The value as typed (after the first ``=``), or None (``~key``)."""
        head, eq, value = self.text.partition("=")
        return value if eq else None

    @property
    def is_hydra(self) -> bool:
        """Hydra's own settings (``hydra.run.dir=...``, ``hydra/launcher=joblib``): not a task override."""
        return self.key == "hydra" or self.key.startswith(("hydra.", "hydra/"))

    @property
    def is_sweep(self) -> bool:
        return self.parsed is not None and self.parsed.is_sweep_override()

    @property
    def is_delete(self) -> bool:
        return self.type == OverrideType.DEL

    @property
    def is_bare_word(self) -> bool:
        """A word with no ``=`` that is no deletion: not an override (explain's KEY argument)."""
        return self.type == OverrideType.CHANGE and "=" not in self.text

    @property
    def prefix(self) -> str:
        return self.text[: len(self.text) - len(self.text.lstrip("+~"))]

    def value(self) -> Any:
        """Hydra's parsed value (a sweep object for a sweep), or None when the text did not parse."""
        return None if self.parsed is None else self.parsed.value()

    def value_element_text(self) -> str:
        """The value written back as Hydra writes it (``1e-05``, ``[a,b]``), or as typed when it
        does not parse; ``VALUE`` for a deletion without value."""
        if self.parsed is not None and self.parsed.value_type is not None:
            try:
                return self.parsed.get_value_element_as_str()
            except Exception:  # noqa: BLE001 - a sweep or odd value is shown as typed
                pass
        return self.value_text if self.value_text is not None else "VALUE"


def _lexical_parts(text: str) -> tuple[OverrideType, str, str | None]:
    """Type, key and package of an override by its spelling (for text Hydra's grammar rejects)."""
    kind, body = OverrideType.CHANGE, text
    for prefix, prefix_kind in _PREFIX_TYPES:
        if text.startswith(prefix):
            kind, body = prefix_kind, text[len(prefix):]
            break
    key, _, package = body.partition("=")[0].partition("@")
    return kind, key, package or None


@cache
def _parser() -> OverridesParser:
    """Hydra's override parser (it keeps no state between parses)."""
    return OverridesParser.create()


@lru_cache(maxsize=4096)
def hydra_parse(text: str) -> HydraOverride:
    """Hydra's parse of one override, memoized per process (the same text parses the same way; the
    result is only read, by us and by Hydra's composition). Raises Hydra's ``OverrideParseException``."""
    (parsed,) = _parser().parse_overrides([text])
    return parsed


def parse_override(text: str, tree: ConfigTree) -> Override:
    """One argument as an :class:`Override` (see the module docstring for the group rule)."""
    try:
        parsed = hydra_parse(text)
    except HydraException:
        kind, key, package = _lexical_parts(text)
        return Override(text, key, kind, package, is_group="=" in text and tree.is_group(key))
    key = parsed.key_or_group
    is_group = not isinstance(parsed.value(), dict) and tree.is_group(key)
    return Override(text, key, parsed.type, parsed.package, is_group, parsed)


# --- the command line -----------------------------------------------------------------------------

Item = Flag | Override


@dataclass(frozen=True)
class CommandLine:
    """What the user asked for: flags and overrides, in the order typed (see the module docstring)."""

    items: tuple[Item, ...] = ()
    default_config: str = PRIMARY_CONFIG
    tree: ConfigTree = field(default_factory=ConfigTree, compare=False, repr=False)
    # The flags the command knows (what it was parsed with), for the "did you mean" of an unknown one.
    specs: tuple[FlagSpec, ...] = field(default=(), compare=False, repr=False)

    # --- building ---------------------------------------------------------------------------------

    @classmethod
    def parse(
        cls,
        args: Sequence[str],
        flags: Sequence[FlagSpec] = HYDRA_FLAGS,
        default_config: str = PRIMARY_CONFIG,
    ) -> CommandLine:
        """A command line as typed; ``flags`` are the options the command knows."""
        split = split_arguments(list(args), flags)
        return cls._build(split, default_config, tuple(flags))

    @classmethod
    def of(
        cls,
        overrides: Sequence[str] = (),
        config_name: str = PRIMARY_CONFIG,
        config_dir: str | None = None,
    ) -> CommandLine:
        """The command line equivalent of an API call: every item of ``overrides`` is an override."""
        split: list[Flag | str] = []
        if config_name != PRIMARY_CONFIG:
            split.append(Flag(CONFIG_NAME, (CONFIG_NAME.name, config_name), config_name))
        if config_dir is not None:
            split.append(Flag(CONFIG_DIR, (CONFIG_DIR.name, config_dir), config_dir))
        split.extend(overrides)
        return cls._build(split, PRIMARY_CONFIG)

    @classmethod
    def _build(
        cls, split: Sequence[Flag | str], default_config: str, specs: tuple[FlagSpec, ...] = ()
    ) -> CommandLine:
        texts = [item for item in split if isinstance(item, str)]
        typed = [item if isinstance(item, str) else " ".join(item.tokens) for item in split]
        not_text = [problem for token in typed if (problem := not_text_problem(token)) is not None]
        if not_text:
            raise ConfigError(not_text)
        too_deep = [text for text in texts if override_nesting_depth(text) > MAX_NESTING]
        if too_deep:
            raise ConfigError([Problem(
                key=f"`{text[:60]}{'...' if len(text) > 60 else ''}`",
                message=f"nests the config more than {MAX_NESTING} levels deep (the sections of its key and "
                "the lists or mappings of its value)",
                fix="write the key with a few sections and the value nested a few levels, as a config holds "
                "them, or put them in a file",
            ) for text in too_deep])
        extra: list[str | None] = [
            f.value for f in split if isinstance(f, Flag) and f.spec in (CONFIG_DIR, CONFIG_PATH)
        ]
        extra += _searchpath_entries(texts)
        tree = ConfigTree.with_extra(extra)
        items = tuple(item if isinstance(item, Flag) else parse_override(item, tree) for item in split)
        return cls(items, default_config, tree, specs)

    def rewritten(self, rewrite: Callable[[Override], Sequence[str] | None]) -> CommandLine:
        """This command line with each override replaced by ``rewrite(override)`` (its new argument
        texts; None keeps it). Flags stay exactly as typed."""
        split: list[Flag | str] = []
        for item in self.items:
            if isinstance(item, Flag):
                split.append(item)
                continue
            replacement = rewrite(item)
            split.extend([item.text] if replacement is None else replacement)
        return self._build(split, self.default_config, self.specs)

    # --- flags ------------------------------------------------------------------------------------

    @property
    def flags(self) -> tuple[Flag, ...]:
        return tuple(item for item in self.items if isinstance(item, Flag))

    def flag_problems(self, command: str, program: str | None = None) -> list[Problem]:
        """An option ``command`` does not know (with the known option spelt nearest it), or one written
        without its value. ``program`` is how the user runs it (``verl-roles COMMAND`` by default)."""
        program = program or f"verl-roles {command}"
        known = [name for spec in self.specs for name in spec.names]
        problems = []
        for flag in self.flags:
            if flag.spec is None:
                problems.append(Problem(key=flag.typed_name, message=f"is not an option of {command}",
                                        fix=did_you_mean(near_names(flag.typed_name, known),
                                                         f"see `{program} --help`")))
            elif flag.missing_value:
                problems.append(Problem(key=flag.typed_name, message=f"needs {flag.spec.value_name}",
                                        fix=f"write `{flag.typed_name} {flag.spec.metavar}` "
                                        f"(see `{program} --help`)"))
            elif (flag.spec in HYDRA_FLAGS and flag.spec.value == REQUIRED and flag.spec.choices
                  and flag.value not in flag.spec.choices):
                # Hydra's parser would refuse it with argparse's words (a command's own flags with a fixed
                # set of values say more of theirs).
                choices = ", ".join(flag.spec.choices)
                guess = near_names(str(flag.value), flag.spec.choices)
                problems.append(Problem(
                    key=flag.typed_name, message=f"takes one of {choices}", value=flag.value, show_value=True,
                    fix=did_you_mean([f"{flag.typed_name} {choice}" for choice in guess],
                                     f"write `{flag.typed_name} {flag.spec.choices[0]}` (one of {choices})")))
        return problems

    def usage_problems(self, command: str, program: str | None = None) -> list[Problem]:
        """:meth:`flag_problems`, and each argument that is no override, for a command whose arguments
        are all overrides."""
        program = program or f"verl-roles {command}"
        return self.flag_problems(command, program) + [
            Problem(key=word.text, message="is not an override (KEY=VALUE)", fix=f"see `{program} --help`")
            for word in self.bare_words()
        ]

    def without(self, *specs: FlagSpec) -> CommandLine:
        """This command line without the flags ``specs`` (e.g. a command's own output option)."""
        items = tuple(i for i in self.items if not (isinstance(i, Flag) and i.spec in specs))
        return CommandLine(items, self.default_config, self.tree, self.specs)

    def flag(self, spec: FlagSpec) -> Flag | None:
        """The last occurrence of ``spec`` (argparse keeps the last)."""
        found = [f for f in self.flags if f.spec == spec]
        return found[-1] if found else None

    @property
    def config_name(self) -> str:
        """The primary config, without a ``.yaml`` suffix (``ppo_megatron_trainer.yaml`` and
        ``ppo_megatron_trainer`` are the same config)."""
        flag = self.flag(CONFIG_NAME)
        name = flag.value if flag is not None and flag.value else self.default_config
        return name.removesuffix(".yaml")

    @property
    def config_name_typed(self) -> str | None:
        flag = self.flag(CONFIG_NAME)
        return flag.value if flag is not None else None

    @property
    def config_dir(self) -> str | None:
        flag = self.flag(CONFIG_DIR)
        return flag.value if flag is not None else None

    def config_dir_path(self) -> str | None:
        """The ``--config-dir`` as an absolute path (a :class:`ConfigError` when it is no directory)."""
        return None if self.config_dir is None else config_dir_path(self.config_dir)

    @property
    def is_multirun(self) -> bool:
        """``-m``, or ``hydra.mode=MULTIRUN`` typed (Hydra's other spelling of it)."""
        typed_mode = any(o.key == "hydra.mode" and (o.value_text or "").upper() == "MULTIRUN"
                         for o in self.overrides)
        return self.flag(MULTIRUN) is not None or typed_mode

    @property
    def sweeps(self) -> bool:
        """Some override sweeps (``a=1,2``): Hydra composes such a command line only as a multirun."""
        return any(o.is_sweep for o in self.overrides)

    # --- overrides --------------------------------------------------------------------------------

    @property
    def overrides(self) -> tuple[Override, ...]:
        """Every argument that is not a flag, in order (Hydra's and the task's)."""
        return tuple(item for item in self.items if isinstance(item, Override))

    @cached_property
    def task_overrides(self) -> tuple[Override, ...]:
        """The overrides of the config itself (not ``hydra.*``), bare words excluded."""
        return tuple(o for o in self.overrides if not o.is_hydra and not o.is_bare_word)

    def texts(self) -> list[str]:
        """Every override as typed (what Hydra is handed)."""
        return [o.text for o in self.overrides]

    def argv(self) -> list[str]:
        """The arguments, flags and overrides, in the order typed."""
        tokens: list[str] = []
        for item in self.items:
            tokens.extend(item.tokens if isinstance(item, Flag) else (item.text,))
        return tokens

    def hydra_argv(self) -> list[str]:
        """The arguments for Hydra's own parser: the flags first (in the order typed), then the overrides
        (argparse takes no flag after the overrides, which the command-line model reads anywhere)."""
        flags = [token for flag in self.flags for token in flag.tokens]
        return [*flags, "--", *self.texts()] if self.texts() else flags

    def bare_words(self) -> list[Override]:
        return [o for o in self.overrides if o.is_bare_word]

    def group_overrides(self) -> list[Override]:
        return [o for o in self.task_overrides if o.is_group]

    def key_overrides(self) -> list[Override]:
        return [o for o in self.task_overrides if not o.is_group]

    def group_choices(self) -> dict[str, str | None]:
        """Group -> the option typed (None for a deletion ``~group``); sweeps are left out."""
        choices: dict[str, str | None] = {}
        for override in self.group_overrides():
            if override.is_sweep:
                continue
            if override.is_delete:
                choices[override.key] = None
            elif override.parsed is not None:
                choices[override.key] = str(override.value())
        return choices

    def release(self) -> str:
        """The verl release the command line picks (``verl_version=``), else the default one."""
        return releases.chosen_on(self.group_choices().items())

    def chose(self, group: str) -> bool:
        """True when the command line picks an option of ``group`` (not a sweep of it)."""
        return group in self.group_choices()

    def set_keys(self) -> list[str]:
        """The keys the command line gives a value (``key=``, ``+key=``, ``++key=``), in order."""
        return [o.key for o in self.key_overrides() if not o.is_delete]

    def deleted_keys(self) -> list[str]:
        """The keys the command line deletes (``~key``), in order; ``~reward``, which deletes the option of
        a group the config mounts as a section of the same name, deletes that section."""
        return [o.key for o in self.task_overrides
                if o.is_delete and (not o.is_group or is_internal_group(o.key))]

    def touched_keys(self) -> list[str]:
        """The keys the command line sets or deletes, in order."""
        return [o.key for o in self.key_overrides()]

    def override_for(self, key: str) -> Override | None:
        """The last override whose key is ``key`` or a section holding it."""
        found = None
        for override in self.task_overrides:
            if key == override.key or key.startswith(override.key + "."):
                found = override
        return found

    def origin_of(self, key: str) -> str:
        """"the command line override `...`" when the command line set ``key``, else ''."""
        override = self.override_for(key)
        return f"the command line override `{override.text}`" if override is not None else ""

    def engine(self, default: str) -> str:
        """The engine the command line chose (aliases resolved), else ``default``."""
        for override in reversed(self.group_overrides()):
            if override.key == ENGINE_KEY and not override.is_sweep and override.parsed is not None:
                value = str(override.value())
                return ENGINE_ALIASES.get(value, value)
        return ENGINE_ALIASES.get(default, default)


def not_text_problem(token: str) -> Problem | None:
    """The problem of an argument no config file can hold, else None.

    Every argument ends up in a UTF-8 file (an override in ``resolved.yaml`` or in Hydra's record of the
    run, a flag's folder in that record), so an argument is UTF-8 text: a byte of another encoding (a
    Latin-1 ``é`` from the shell, which Python reads as a stand-in character) is refused here, once, for
    every command and the API, before anything is composed; and so is a NUL character (the API can pass
    one; no path or file name holds it)."""
    if "\0" in token:
        return Problem(key=f"`{token}`", fix="remove it",
                       message="holds a NUL character, which no file name, path or config value can hold")
    try:
        token.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(token[error.start])
        what = f"the byte {code - 0xDC00:#04x}" if 0xDC80 <= code <= 0xDCFF else "a character"
        return Problem(
            key=f"`{token}`",
            message=f"holds {what}, which is not UTF-8 text; every config file verl_roles writes "
            "(resolved.yaml, Hydra's record of the run) is UTF-8",
            fix="write it in UTF-8 (`locale` shows your shell's encoding; `iconv -f latin1 -t utf-8` "
            "converts a name or file written in Latin-1)")
    return None


def _searchpath_entries(texts: Sequence[str]) -> list[str]:
    """The directories a ``hydra.searchpath=[...]`` override adds (they hold config groups too)."""
    entries: list[str] = []
    for text in texts:
        if not text.lstrip("+").startswith("hydra.searchpath="):
            continue
        try:
            value = hydra_parse(text).value()
        except HydraException:
            continue
        if isinstance(value, list):
            entries.extend(str(v) for v in value)
    return entries

