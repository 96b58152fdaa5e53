"""Legacy keys on the command line: translated into their current keys before Hydra composes."""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra.core.override_parser.types import ChoiceSweep

from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.layout import PRIMARY_CONFIG
from verl_roles.base.notices import ConfigDeprecationWarning, warn
from verl_roles.inputs.cmdline import CommandLine, Override
from verl_roles.inputs.flags import CONFIG_DIR, CONFIG_PATH, Flag
from verl_roles.legacy.tables import (
    LEGACY_CONFIG_NAMES,
    MIGRATE_HINT,
    LegacyKey,
    RemovedKey,
    find,
    find_removed,
    removed_problem,
    removed_warning,
)
from verl_roles.omegaconf_adapter.override_text import element_text


@dataclass(frozen=True)
class Translation:
    """One command-line override rewritten from a legacy key to its current key."""

    entry: LegacyKey
    old_key: str
    new_key: str
    old_token: str
    new_token: str
    value_text: str

    def message(self) -> str:
        if self.entry.alias:
            read = self.entry.read_into(self.new_key, self.value_text)
            return (
                f"{self.old_key} is {self.entry.kind()}; {read} (verl reads both): `{self.old_token}` was "
                f"read as `{self.new_token}`."
            )
        return (
            f"{self.old_key} is a deprecated key; it now sets {self.new_key} "
            f"(value {self.value_text}): `{self.old_token}` was read as `{self.new_token}`. "
            f"Write `{self.new_token}` instead; {MIGRATE_HINT}."
        )


def _converted_value_text(entry: LegacyKey, override: Override) -> str | None:
    """The override's value text with the entry's value translation applied (quoting kept when the
    value does not change); None for a deletion without value."""
    typed = override.value_text
    if entry.convert is None or typed is None or override.parsed is None:
        # An unparsable value is left as typed, for Hydra to report with the rest of the command line.
        return typed
    value = override.value()
    if override.is_sweep:
        if not isinstance(value, ChoiceSweep) or not value.simple_form:
            return typed
        converted = [entry.converted(v) for v in value.list]
        return typed if converted == value.list else ",".join(element_text(v) for v in converted)
    converted = entry.converted(value)
    return typed if converted == value else element_text(converted)


def translate_override(override: Override, release: str = releases.DEFAULT_RELEASE) -> Translation | None:
    """The translation of one override, or None when it uses no key legacy under ``release`` (a group
    choice, an ``@package`` override and every current key pass unchanged)."""
    if override.is_group or override.package is not None:
        return None
    hit = find(override.key, release)
    if hit is None:
        return None
    entry, new_key = hit
    # `+key=v` appended a key that did not exist; the current key exists (unless the entry says it
    # does not), so plain `key=v`.
    prefix = "" if override.prefix == "+" and not entry.open_target else override.prefix
    value = _converted_value_text(entry, override)
    new_token = f"{prefix}{new_key}" + ("" if value is None else f"={value}")
    return Translation(entry, override.key, new_key, override.text, new_token, value or "(deleted)")


def _same_value(translated: Override, current: Override) -> bool:
    if translated.parsed is None or current.parsed is None:
        return translated.value_text == current.value_text
    return translated.value() == current.value()


@dataclass(frozen=True)
class Removal:
    """A command-line override of a key with no current equivalent, dropped from the command line;
    ``harmless`` when its value is what verl does anyway (a warning), else it is refused."""

    entry: RemovedKey
    key: str
    token: str
    value: object
    harmless: bool
    release: str

    def message(self) -> str:
        return removed_warning(self.entry, self.key, self.value, self.release)


@dataclass(frozen=True)
class TranslatedCommand:
    """A command line with every legacy key read as its current key, and what was rewritten or
    dropped."""

    command: CommandLine
    translations: tuple[Translation, ...]
    removals: tuple[Removal, ...] = ()


def _removal(override: Override, release: str) -> Removal | None:
    if override.is_group or override.package is not None:
        return None
    entry = find_removed(override.key, release)
    if entry is None:
        return None
    value = override.value() if override.parsed is not None else override.value_text
    harmless = override.is_delete or (
        not override.is_sweep and any(type(value) is type(h) and value == h for h in entry.harmless)
    )
    return Removal(entry, override.key, override.text, value, harmless, release)


def translate_command(command: CommandLine, refuse_removed: bool = True) -> TranslatedCommand:
    """Rewrite every legacy key among the overrides of ``command`` (flags and their values are never
    touched). A legacy override whose current key is also on the command line with the same value
    is dropped; with a different value it is a :class:`ConfigError` naming both. An override of a key
    with no current equivalent is dropped; unless its value is harmless it is a :class:`ConfigError`
    naming what replaced it (with ``refuse_removed``; ``verl-roles migrate`` only lists it). Legacy
    means legacy under the release the command line picks (``verl_version=``, else the default)."""
    release = command.release()
    removals = {id(o): r for o in command.key_overrides() if (r := _removal(o, release)) is not None}
    refused = [r for r in removals.values() if not r.harmless]
    if refused and refuse_removed:
        origin = "the command line override `{}`"
        raise ConfigError([removed_problem(r.entry, r.key, r.value, origin.format(r.token), release)
                           for r in refused])
    if removals:
        command = command.rewritten(lambda o: [] if id(o) in removals else None)
    translated = _translate_keys(command, release)
    return TranslatedCommand(translated.command, translated.translations, tuple(removals.values()))


def _translate_keys(command: CommandLine, release: str) -> TranslatedCommand:
    translations = {
        id(o): t for o in command.key_overrides() if (t := translate_override(o, release)) is not None}
    if not translations:
        return TranslatedCommand(command, ())

    def rewrite(override: Override) -> list[str] | None:
        translation = translations.get(id(override))
        return None if translation is None else [translation.new_token]

    # One new override per old one, so the two lists line up.
    read_as = dict(zip(map(id, command.overrides), command.rewritten(rewrite).overrides, strict=True))
    explicit = {o.key: o for o in command.key_overrides() if id(o) not in translations}
    problems: list[Problem] = []
    dropped: set[int] = set()
    for override_id, translation in translations.items():
        current = explicit.get(translation.new_key)
        if current is None:
            continue
        if _same_value(read_as[override_id], current):
            dropped.add(override_id)
            continue
        problems.append(
            Problem(
                key=translation.old_key,
                message=(
                    f"is {translation.entry.spelling_of(translation.new_key)}, and the command line sets "
                    f"both to different values: `{translation.old_token}` and `{current.text}`"
                ),
                origin="the command line",
                fix=f"keep only `{current.text}` (the current key) and drop `{translation.old_token}`",
            )
        )
    if problems:
        raise ConfigError(problems)
    result = command.rewritten(lambda o: [] if id(o) in dropped else rewrite(o))
    return TranslatedCommand(result, tuple(translations.values()))


def deprecated_config_warning(command: CommandLine) -> str | None:
    """The warning for a deprecated primary config name (with or without ``.yaml``), or None."""
    replacement = LEGACY_CONFIG_NAMES.get(command.config_name)
    if replacement is None:
        return None
    return (
        f"--config-name {command.config_name} is deprecated; it composes to exactly the same config as "
        f"`python -m verl_roles.main {' '.join(replacement)}` (config {PRIMARY_CONFIG}). "
        "Use that command instead."
    )


@dataclass(frozen=True)
class ConfigPathMove:
    """What the ``--config-path DIR`` of a verl launch becomes here: ``tokens`` replace ``flag`` (none:
    it is dropped), ``why`` says so."""

    flag: Flag
    tokens: tuple[str, ...]
    why: str

    @property
    def dropped(self) -> bool:
        return not self.tokens


def config_path_move(command: CommandLine) -> ConfigPathMove | None:
    """The one reading of ``--config-path DIR`` (Hydra's: DIR replaces the config tree), for the main job's
    refusal and for ``migrate``'s rewrite alike. verl's launch scripts pass verl's own config folder this
    way to reach its trainer configs (``--config-path=config --config-name=ppo_megatron_trainer``); Hydra
    reads a relative DIR relative to the trainer's module (verl/trainer/), so a relative DIR with a primary
    config verl_roles' tree ships (ppo_trainer, or a deprecated name of it) is verl's own folder, which our
    tree stands for: the flag is dropped. Otherwise DIR is the user's folder: it becomes
    ``--config-dir DIR``, which adds it next to our tree. None: no such flag."""
    flag = command.flag(CONFIG_PATH)
    if flag is None or flag.value is None:
        return None
    name = command.config_name
    verls = name == PRIMARY_CONFIG or name in LEGACY_CONFIG_NAMES
    if verls and not Path(flag.value).expanduser().is_absolute():
        return ConfigPathMove(flag, (), (
            f"it names verl's own config folder, where verl finds {name}; verl_roles' config tree stands "
            "for that folder"))
    spelled = (f"{CONFIG_DIR.name}={flag.value}",) if len(flag.tokens) == 1 else (CONFIG_DIR.name, flag.value)
    return ConfigPathMove(flag, spelled, (
        "it adds your folder to the search path next to verl_roles' configs, so --config-name finds your "
        f"primary config there and its defaults find {PRIMARY_CONFIG} and the groups here"))


def read_command_line(command: CommandLine) -> TranslatedCommand:
    """The hook run before composition: legacy keys read as their current keys, one warning per use,
    and one for a deprecated config name."""
    translated = translate_command(command)
    config_warning = deprecated_config_warning(command)
    if config_warning is not None:
        warn(config_warning, ConfigDeprecationWarning)
    for translation in translated.translations:
        warn(translation.message(), translation.entry.warning)
    for removal in translated.removals:
        warn(removal.message(), ConfigDeprecationWarning)
    return translated


def migrate_overrides(tokens: Sequence[str]) -> tuple[list[str], list[Translation]]:
    """``tokens`` (a command line) with every legacy key rewritten, and what was rewritten."""
    translated = translate_command(CommandLine.parse(tokens))
    return translated.command.argv(), list(translated.translations)
