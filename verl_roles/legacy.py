"""Legacy key paths: the one table of old key -> current key, and where it is applied.

verl's config moved keys over time (flat LoRA keys became the ``lora`` block, the FSDP critic's
``critic.model.fsdp_config`` became ``critic.fsdp``, the top-level ``reward_model`` /
``custom_reward_function`` / ``sandbox_fusion`` sections became the ``reward`` section). Old launch
scripts and old config files must keep working without a silent change, so every legacy key is
translated to its current key and each use is warned about, naming the old key, the new key and the
value; an old key with no current equivalent (:data:`REMOVED_KEYS`) is an error naming what replaced
it, or, for a value that is what verl does anyway, dropped with a warning:

- command-line overrides are translated *before* Hydra composes (otherwise Hydra rejects the old
  key as "not in struct"): :func:`read_command_line` rewrites the overrides of the one
  :class:`~verl_roles.cmdline.CommandLine` (never a flag's value), for ``verl_roles.compose``,
  ``python -m verl_roles.main`` (which hands the rewritten arguments to the Hydra app, so multirun
  sweeps such as ``...lora_rank=8,16`` translate too) and ``verl-roles explain``;
- config files (a ``--config-dir`` primary config, a role option) are composed as they are, then
  :func:`normalize_config` moves any legacy key found in the composed config (pipeline step
  "normalise legacy", before validation).

Setting the old and the new key to different values is an error naming both.
``verl-roles migrate`` (:mod:`verl_roles.migrate`) prints the modern command line once and for all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from hydra.core.override_parser.types import ChoiceSweep
from omegaconf import DictConfig, OmegaConf

from verl_roles import paths, releases
from verl_roles.cmdline import CommandLine, Override
from verl_roles.errors import ConfigError, Problem
from verl_roles.layout import (
    CRITIC,
    DEFAULT_ENGINE,
    DP,
    ENGINE_KEY,
    LORA_BLOCK,
    MODEL_SECTIONS,
    PRIMARY_CONFIG,
)
from verl_roles.notices import ConfigDeprecationWarning, ConfigTranslationWarning, warn
from verl_roles.omegaconf_adapter.nodes import ABSENT, raw_at
from verl_roles.omegaconf_adapter.override_text import element_text

Convert = Callable[[object], object]


def _null_to_empty_list(value: object) -> object:
    """The flat ``exclude_modules`` used null for "none"; the LoRA block uses an empty list."""
    return [] if value is None else value


@dataclass(frozen=True)
class LegacyKey:
    """One legacy key path and the current key path it maps to.

    ``section`` marks a whole section that moved: every key under ``old`` moves under ``new``.
    ``convert`` translates the value when the two spellings differ in meaning (None: unchanged).
    ``shipped``: the old key is in our config with a null value, as in verl's own config (its
    legacy reward sections); null there means unset, and the key stays (null) once its value moved.
    ``open_target``: the current key is not in the config (``reward.reward_kwargs``, added with
    ``+``), so a ``+`` typed with the old key is kept.
    ``alias``: the old key is verl's too, derived here from the new one (the flat LoRA keys), so the
    entry applies under every release. Any other entry applies under a release whose config lacks the
    old key: a key verl 0.8.0 has is no legacy key with ``verl_version=0.8.0``.
    """

    old: str
    new: str
    reason: str
    convert: Convert | None = None
    section: bool = False
    shipped: bool = False
    open_target: bool = False
    alias: bool = False

    def applies(self, release: str) -> bool:
        """Whether the old key is legacy under ``release`` (see the class docstring)."""
        return self.alias or self.shipped or not releases.has_key(release, self.old)

    def why(self, release: str) -> str:
        return self.reason.format(release=release)

    def new_key_for(self, key: str) -> str | None:
        """The current key for ``key``, or None when this entry does not cover ``key``."""
        if key == self.old:
            return self.new
        if self.section and key.startswith(self.old + "."):
            return self.new + key[len(self.old):]
        return None

    def converted(self, value: object) -> object:
        return value if self.convert is None else self.convert(value)

    # How the messages call the old key: verl's own flat LoRA keys are not deprecated (verl's examples
    # use them); we read them into the one block. Any other old key is a deprecated one.
    @property
    def warning(self) -> type[ConfigDeprecationWarning] | type[ConfigTranslationWarning]:
        return ConfigTranslationWarning if self.alias else ConfigDeprecationWarning

    def kind(self) -> str:
        return "verl's flat LoRA key" if self.alias else "a deprecated key"

    def spelling_of(self, new_key: str) -> str:
        return f"verl's flat spelling of {new_key}" if self.alias else f"the deprecated spelling of {new_key}"

    def read_into(self, new_key: str, value_text: str) -> str:
        """What reading the old key did, for a warning."""
        if self.alias:
            return (f"verl_roles reads it into the one `{LORA_BLOCK}` block: it sets {new_key} (value "
                    f"{value_text}), and the resolved config writes both spellings from that block")
        return f"it now sets {new_key} (value {value_text})"


_LORA_REASON = "verl's flat LoRA keys are read into the one structured `lora` block (verl reads both)"
_SKIP_REASON = "verl {release} holds rollout dumping in the top-level `skip` section"
_TEACHER_REASON = (
    "verl {release} holds teachers by name under `distillation.teacher_models`, their pool in `distillation`"
)

_REWARD_REASON = (
    "verl {release} reads reward settings under `reward`; its legacy top-level reward keys have no effect "
    "in its PPO trainer"
)

# verl's legacy reward keys (trainer/config/legacy_reward_impl.yaml since 0.8.0, null in our config too)
# and the Jan-2026 ones (reward_model/*.yaml, reward_manager.yaml), each where verl reads it
# (experimental/reward_loop/reward_loop.py migrate_legacy_reward_impl maps the same keys, but only the
# fully-async entry point calls it). Moved key by key: a section set in part keeps the current
# defaults for the rest (custom_reward_function.name stays compute_score, as in Jan 2026).
_REWARD_KEYS: tuple[LegacyKey, ...] = (
    *(
        LegacyKey(f"reward_model.{old}", f"reward.{new}", _REWARD_REASON, shipped=True)
        for old, new in (
            ("num_workers", "num_workers"),
            ("reward_manager", "reward_manager.name"),
            ("reward_loop_source", "reward_manager.source"),
            ("reward_loop_module_path", "reward_manager.module.path"),
            ("reward_loop_class_name", "reward_manager.module.name"),
            ("enable", "reward_model.enable"),
            ("enable_resource_pool", "reward_model.enable_resource_pool"),
            ("n_gpus_per_node", "reward_model.n_gpus_per_node"),
            ("nnodes", "reward_model.nnodes"),
            ("model.path", "reward_model.model_path"),
        )
    ),
    *(
        LegacyKey(old, new, _REWARD_REASON, section=True, shipped=True)
        for old, new in (
            ("reward_model.rollout", "reward.reward_model.rollout"),
            ("custom_reward_function", "reward.custom_reward_function"),
            ("sandbox_fusion", "reward.sandbox_fusion"),
        )
    ),
    LegacyKey("reward_model.sandbox_fusion", "reward.sandbox_fusion", _REWARD_REASON, section=True),
    LegacyKey("reward_manager", "reward.reward_manager", _REWARD_REASON, section=True),
    LegacyKey(
        "reward_model.reward_kwargs", "reward.reward_kwargs", _REWARD_REASON, section=True, open_target=True
    ),
)

# The one table of legacy key paths. Documented in docs/legacy.md.
LEGACY_KEYS: tuple[LegacyKey, ...] = (
    *(
        LegacyKey(f"{model}.{old}", f"{model}.{LORA_BLOCK}.{new}", _LORA_REASON, convert, alias=True)
        for model in MODEL_SECTIONS
        for old, new, convert in (
            ("lora_rank", "rank", None),
            ("lora_alpha", "alpha", None),
            ("target_modules", "target_modules", None),
            ("exclude_modules", "exclude_modules", _null_to_empty_list),
            ("lora_adapter_path", "adapter_path", None),
        )
    ),
    LegacyKey(
        "critic.model.fsdp_config",
        f"{CRITIC}.{DP.block('critic')}",
        "the FSDP critic's engine block sits next to its optimizer, as in current verl",
        section=True,
    ),
    *(
        LegacyKey(f"actor_rollout_ref.rollout.skip.{name}", f"skip.rollout.{name}", _SKIP_REASON)
        for name in ("enable", "dump_dir", "action")
    ),
    LegacyKey(
        "distillation.teacher_model.inference",
        "distillation.teacher_models.teacher_model.inference",
        _TEACHER_REASON,
        section=True,
    ),
    *(
        LegacyKey(f"distillation.teacher_model.{old}", new, _TEACHER_REASON)
        for old, new in (
            ("model_path", "distillation.teacher_models.teacher_model.model_path"),
            ("nnodes", "distillation.nnodes"),
            ("n_gpus_per_node", "distillation.n_gpus_per_node"),
        )
    ),
    *_REWARD_KEYS,
)


@dataclass(frozen=True)
class RemovedKey:
    """An old key (or, with ``section``, every key below it) that has no current equivalent.

    Setting it is an error naming ``replaced_by``, except to a value in ``harmless``: what verl does
    anyway, so the key is dropped with a warning.
    """

    old: str
    replaced_by: str
    section: bool = False
    harmless: tuple[object, ...] = ()

    def covers(self, key: str) -> bool:
        return key == self.old or (self.section and key.startswith(self.old + "."))

    def applies(self, release: str) -> bool:
        """Whether the key is removed under ``release``: under every supported one, since each reads its
        reward settings under ``reward`` only (verl 0.8.0 did already; the top-level reward sections
        some of these keys sit in are null leftovers in each release's config)."""
        return releases.is_supported(release)

    def why(self, release: str) -> str:
        return self.replaced_by.format(release=release)


_RM_WORKER = (
    "verl {release} has no FSDP/Megatron reward-model worker any more: the reward model is served by an "
    "inference engine, set with reward.reward_model.model_path and reward.reward_model.rollout.* "
    "(batching: max_num_seqs, max_num_batched_tokens; memory: gpu_memory_utilization; parallelism: "
    "tensor_model_parallel_size)"
)

# Jan-2026 reward-model keys no supported verl has anything for (and two of verl's own legacy keys its
# migration ignores). Documented in docs/legacy.md.
REMOVED_KEYS: tuple[RemovedKey, ...] = (
    RemovedKey(
        "reward_model.use_reward_loop",
        "the reward loop is verl {release}'s only reward implementation (the legacy reward-model worker is "
        "gone); reward.reward_model.* configures its reward model",
        harmless=(True,),
    ),
    RemovedKey(
        "reward_model.launch_reward_fn_async",
        "verl {release}'s reward loop always computes rewards asynchronously",
        harmless=(True, False),
    ),
    *(
        RemovedKey(f"reward_model.{key}", _RM_WORKER, section=section)
        for key, section in (
            ("strategy", False),
            ("micro_batch_size", False),
            ("micro_batch_size_per_gpu", False),
            ("max_length", False),
            ("use_dynamic_bsz", False),
            ("forward_max_token_len_per_gpu", False),
            ("ulysses_sequence_parallel_size", False),
            ("load_weight", False),
            ("nccl_timeout", False),
            ("megatron", True),
            ("profiler", True),
            ("model.input_tokenizer", False),
            ("model.override_config", True),
            ("model.use_shm", False),
            ("model.use_remove_padding", False),
            ("model.use_fused_kernels", False),
            ("model.fsdp_config", True),
            ("model.external_lib", False),
            ("model.trust_remote_code", False),
        )
    ),
)


def find_removed(key: str, release: str = releases.DEFAULT_RELEASE) -> RemovedKey | None:
    """The entry of :data:`REMOVED_KEYS` covering ``key`` under ``release``, if any."""
    for entry in REMOVED_KEYS:
        if entry.covers(key) and entry.applies(release):
            return entry
    return None


def removed_problem(entry: RemovedKey, key: str, value: object, origin: str, release: str) -> Problem:
    return Problem(
        key=key,
        message=f"is a legacy key verl {release} has no equivalent for (set to {element_text(value)})",
        origin=origin,
        fix=f"remove it: {entry.why(release)}",
    )


def removed_warning(entry: RemovedKey, key: str, value: object, release: str) -> str:
    return (
        f"{key}={element_text(value)} is a legacy key with no current equivalent, dropped: "
        f"{entry.why(release)}. Remove it; {MIGRATE_HINT}."
    )

# Deprecated primary config names -> the overrides that replace them on the primary config.
LEGACY_CONFIG_NAMES: dict[str, list[str]] = {
    "ppo_megatron_trainer": ["model_engine=megatron"],
}

MIGRATE_HINT = "`verl-roles migrate ...` rewrites a whole command line"


def find(key: str, release: str = releases.DEFAULT_RELEASE) -> tuple[LegacyKey, str] | None:
    """The table entry covering the dotted ``key`` and the current key it maps to, if legacy under
    ``release``."""
    for entry in LEGACY_KEYS:
        if not entry.applies(release):
            continue
        new = entry.new_key_for(key)
        if new is not None:
            return entry, new
    return None


def old_key_label(key: str) -> str:
    """What a view calls the old key ``key``: verl's own flat LoRA keys are not legacy keys."""
    flat = any(entry.alias and entry.new_key_for(key) is not None for entry in LEGACY_KEYS)
    return "verl's flat LoRA key" if flat else "legacy key"


# --------------------------------------------------------------------------- command line


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


# --------------------------------------------------------------------------- config files


@dataclass(frozen=True)
class LegacyMove:
    """A legacy key a config file set: moved to its current key (``value``), or ``dropped`` because
    the command line sets the current key."""

    old_key: str
    new_key: str
    value: object
    dropped: bool = False


@dataclass(frozen=True)
class LegacyReport:
    """What the legacy step did to the composed config."""

    moves: tuple[LegacyMove, ...] = ()
    step: ClassVar[str] = "legacy"


def _legacy_keys_in(cfg: DictConfig, release: str) -> Iterator[tuple[LegacyKey, str, object]]:
    """``(entry, old key, unresolved value)`` for every leaf present in ``cfg`` legacy under ``release``."""
    # Runs on every compose: look each parent section up once and test key membership only.
    parents: dict[str, object] = {}
    for entry in LEGACY_KEYS:
        if not entry.applies(release):
            continue
        parent_key, _, leaf = entry.old.rpartition(".")
        if parent_key not in parents:
            parents[parent_key] = OmegaConf.select(cfg, parent_key, default=None)
        parent = parents[parent_key]
        if not isinstance(parent, DictConfig) or leaf not in parent:
            continue
        value = raw_at(cfg, entry.old)
        found = paths.leaves(value, (entry.old,)) if entry.section else [((entry.old,), value)]
        for key, leaf in found:
            # A shipped legacy key (null in our config, as in verl's) is unset while it is null.
            if not (entry.shipped and leaf is None):
                yield entry, paths.dotted(key), leaf


def _removed_keys_in(cfg: DictConfig, release: str) -> Iterator[tuple[RemovedKey, str, object]]:
    """``(entry, key, unresolved value)`` for every key with no current equivalent a file set (null is
    unset: verl keeps two of them at null, and null was the Jan-2026 default of most)."""
    for entry in REMOVED_KEYS:
        if not entry.applies(release):
            continue
        value = raw_at(cfg, entry.old)
        if value is ABSENT:
            continue
        found = paths.leaves(value, (entry.old,)) if entry.section else [((entry.old,), value)]
        yield from ((entry, paths.dotted(key), leaf) for key, leaf in found if leaf is not None)


def _set_on_command_line(key: str, cli_keys: set[str]) -> bool:
    return any(key == k or key.startswith(k + ".") for k in cli_keys)


def normalize_config(
    cfg: DictConfig, command: CommandLine, stock_config: Callable[[str, str], DictConfig]
) -> LegacyReport:
    """Move every legacy key a config file put into the composed ``cfg`` to its current key.

    ``command`` is the (already translated) command line: a value set there wins over a config
    file, as always in Hydra. Otherwise the legacy value is used unless the file also set the current
    key to a different value, which is an error naming both keys. ``stock_config(engine, release)`` is
    our own config for an engine and release with no user input (it tells a value a file set from a
    default); it is asked
    only when a config file uses a legacy key.
    """
    release = releases.release_of(cfg)
    found = list(_legacy_keys_in(cfg, release))
    removed = list(_removed_keys_in(cfg, release))
    if not found and not removed:
        return LegacyReport()
    engine = str(cfg.get(ENGINE_KEY, DEFAULT_ENGINE))
    cli_keys = set(command.set_keys())
    problems: list[Problem] = []
    moves: list[LegacyMove] = []
    dropped: list[str] = []
    for entry, key, value in removed:
        if any(type(value) is type(h) and value == h for h in entry.harmless):
            warn(removed_warning(entry, key, value, release) + " (from a config file)",
                 ConfigDeprecationWarning)
            dropped.append(key)
        else:
            problems.append(removed_problem(entry, key, value, "a config file", release))
    for entry, old_key, old_value in found:
        new_key = entry.new_key_for(old_key)
        assert new_key is not None
        new_value = entry.converted(old_value)
        parent_key = new_key.rpartition(".")[0]
        parent = OmegaConf.select(cfg, parent_key, default=None)
        if not entry.open_target and not isinstance(parent, DictConfig):
            problems.append(
                Problem(
                    key=old_key,
                    message=(
                        f"is {entry.kind()} read into {new_key}, which does not exist "
                        f"under model_engine={engine}"
                    ),
                    origin="a config file",
                    fix=f"remove {old_key} from the config file, or use the engine it belongs to",
                )
            )
            continue
        if _set_on_command_line(new_key, cli_keys):
            warn(
                f"{old_key} (value {element_text(old_value)}) in a config file is {entry.kind()} for "
                f"{new_key}; it is ignored because the command line sets {new_key}. "
                + ("Remove it from the file, or set the block there." if entry.alias
                   else "Rename it in the file."),
                entry.warning,
            )
            moves.append(LegacyMove(old_key, new_key, new_value, dropped=True))
            continue
        current = raw_at(cfg, new_key)
        default = raw_at(stock_config(engine, release), new_key)
        if current not in (default, new_value):
            problems.append(
                Problem(
                    key=old_key,
                    message=(
                        f"is {entry.spelling_of(new_key)}, and the config sets both to different "
                        f"values: {old_key}={element_text(old_value)} and {new_key}={element_text(current)}"
                    ),
                    origin="a config file",
                    fix=f"keep only {new_key} and remove {old_key}",
                )
            )
            continue
        moves.append(LegacyMove(old_key, new_key, new_value))
        value_text = element_text(new_value)
        if entry.alias:
            text = (f"{old_key} in a config file is {entry.kind()}; {entry.read_into(new_key, value_text)}. "
                    "Writing the block in the file says the same.")
        else:
            text = (f"{old_key} is a deprecated key; it now sets {new_key} (value {value_text}). "
                    f"Rename it to {new_key} in your config file.")
        warn(text, entry.warning)
    if problems:
        raise ConfigError(problems)
    for move in moves:
        if not move.dropped:
            paths.assign(cfg, move.new_key, move.value, add=True)
    for entry in LEGACY_KEYS:
        if not entry.applies(release) or raw_at(cfg, entry.old) is ABSENT:
            continue
        if entry.shipped:
            # verl's config keeps its legacy reward keys (null): only the values moved are reset.
            for move in moves:
                if entry.new_key_for(move.old_key) is not None:
                    paths.assign(cfg, move.old_key, None)
        else:
            paths.delete(cfg, entry.old)
    stock = stock_config(engine, release) if dropped else None
    for key in dropped:
        if raw_at(stock, key) is ABSENT:
            paths.delete(cfg, key)
        else:
            paths.assign(cfg, key, None)
    return LegacyReport(tuple(moves))
