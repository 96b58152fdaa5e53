"""Legacy key paths: the one table of old key -> current key, and where it is applied.

verl's config moved keys over time (flat LoRA keys became the ``lora`` block, the FSDP critic's
``critic.model.fsdp_config`` became ``critic.fsdp``). Old launch scripts and old config files must
keep working without a silent change, so every legacy key is translated to its current key and
each use is warned about, naming the old key, the new key and the value:

- command-line overrides are translated *before* Hydra composes (otherwise Hydra rejects the old
  key as "not in struct"): :func:`translate_overrides`, used by ``verl_roles.compose`` and by
  ``python -m verl_roles.main`` (which rewrites the argv it hands to the Hydra app, so multirun
  sweeps such as ``...lora_rank=8,16`` translate too);
- config files (a ``--config-dir`` primary config, a role option) are composed as they are, then
  :func:`normalize_config` moves any legacy key found in the composed config (pipeline step
  "normalise legacy", before validation).

Setting the old and the new key to different values is an error naming both.
``verl-roles migrate`` (:mod:`verl_roles.migrate`) prints the modern command line once and for all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_roles.errors import ConfigError, Problem
from verl_roles.layout import DEFAULT_ENGINE, ENGINE_KEY
from verl_roles.notices import ConfigDeprecationWarning, warn

Convert = Callable[[object], object]


def _null_to_empty_list(value: object) -> object:
    """The flat ``exclude_modules`` used null for "none"; the LoRA block uses an empty list."""
    return [] if value is None else value


@dataclass(frozen=True)
class LegacyKey:
    """One legacy key path and the current key path it maps to.

    ``section`` marks a whole section that moved: every key under ``old`` moves under ``new``.
    ``convert`` translates the value when the two spellings differ in meaning (None: unchanged).
    """

    old: str
    new: str
    reason: str
    convert: Convert | None = None
    section: bool = False

    def new_key_for(self, key: str) -> str | None:
        """The current key for ``key``, or None when this entry does not cover ``key``."""
        if key == self.old:
            return self.new
        if self.section and key.startswith(self.old + "."):
            return self.new + key[len(self.old):]
        return None

    def converted(self, value: object) -> object:
        return value if self.convert is None else self.convert(value)


MODEL_SECTIONS = ("actor_rollout_ref.model", "critic.model")

_LORA_REASON = "verl's flat LoRA keys are now the one structured `lora` block"

# The one table of legacy key paths. Documented in the README ("Legacy keys").
LEGACY_KEYS: tuple[LegacyKey, ...] = (
    *(
        LegacyKey(f"{model}.{old}", f"{model}.lora.{new}", _LORA_REASON, convert)
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
        "critic.fsdp",
        "the FSDP critic's engine block sits next to its optimizer, as in current verl",
        section=True,
    ),
)

# Deprecated primary config names -> the overrides that replace them on the primary config.
LEGACY_CONFIG_NAMES: dict[str, list[str]] = {
    "ppo_megatron_trainer": ["model_engine=megatron"],
}

MIGRATE_HINT = "`verl-roles migrate ...` rewrites a whole command line"


def find(key: str) -> tuple[LegacyKey, str] | None:
    """The table entry covering the dotted ``key`` and the current key it maps to, if legacy."""
    for entry in LEGACY_KEYS:
        new = entry.new_key_for(key)
        if new is not None:
            return entry, new
    return None


# --------------------------------------------------------------------------- command line


@dataclass(frozen=True)
class Translation:
    """One command-line token rewritten from a legacy key to its current key."""

    entry: LegacyKey
    old_key: str
    new_key: str
    old_token: str
    new_token: str
    value_text: str

    def message(self) -> str:
        return (
            f"{self.old_key} is a deprecated key; it now sets {self.new_key} "
            f"(value {self.value_text}): `{self.old_token}` was read as `{self.new_token}`. "
            f"Write `{self.new_token}` instead; {MIGRATE_HINT}."
        )


def _split_token(token: str) -> tuple[str, str, str] | None:
    """``(prefix, key, rest)`` of an override token (``rest`` starts at ``=`` or is empty)."""
    if token.startswith("-"):
        return None
    prefix = token[: len(token) - len(token.lstrip("+~"))]
    body = token[len(prefix):]
    key, sep, value = body.partition("=")
    if not key or "@" in key or "/" in key:
        return None
    return prefix, key, sep + value


def _parse(token: str):  # noqa: ANN202 - hydra's Override type
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_override(token)


def _show(value: object) -> str:
    """A value as it would be written in an override (``true``, ``null``, ``[a,b]``)."""
    try:
        return _element_text(value)
    except Exception:  # noqa: BLE001 - any value still gets shown
        return repr(value)


def _element_text(value: object) -> str:
    from hydra.core.override_parser.types import Override

    return Override._get_value_element_as_str(value)  # noqa: SLF001 - Hydra's own serializer


def _convert_value_text(entry: LegacyKey, token: str, rest: str) -> str:
    """``rest`` (``=value``) with the entry's value translation applied, quoting kept when unchanged."""
    if entry.convert is None or not rest:
        return rest
    from hydra.core.override_parser.types import ChoiceSweep
    from hydra.errors import HydraException

    try:
        override = _parse(token)
    except HydraException:
        # An unparsable value is left as typed, for Hydra to report with the rest of the command line.
        return rest
    if override.is_sweep_override():
        sweep = override.value()
        if not isinstance(sweep, ChoiceSweep) or not sweep.simple_form:
            return rest
        converted = [entry.converted(v) for v in sweep.list]
        if converted == sweep.list:
            return rest
        return "=" + ",".join(_element_text(v) for v in converted)
    value = override.value()
    converted = entry.converted(value)
    return rest if converted == value else "=" + _element_text(converted)


def translate_token(token: str) -> Translation | None:
    """The translation of one override token, or None when it uses no legacy key."""
    parts = _split_token(token)
    if parts is None:
        return None
    prefix, key, rest = parts
    hit = find(key)
    if hit is None:
        return None
    entry, new_key = hit
    # `+key=v` appended a key that did not exist; the current key always exists, so plain `key=v`.
    new_prefix = "" if prefix == "+" else prefix
    new_rest = _convert_value_text(entry, token, rest)
    value_text = new_rest[1:] if new_rest else "(deleted)"
    return Translation(entry, key, new_key, token, f"{new_prefix}{new_key}{new_rest}", value_text)


def _values_equal(left: str, right: str) -> bool:
    try:
        return _parse(left).value() == _parse(right).value()
    except Exception:  # noqa: BLE001 - an unparsable token is left for Hydra to report
        return left.partition("=")[2] == right.partition("=")[2]


def migrate_overrides(overrides: Sequence[str]) -> tuple[list[str], list[Translation]]:
    """Rewrite every legacy key in ``overrides``; return the new tokens and what was rewritten.

    Tokens that are not overrides (``--cfg``, ``job``, ``-m``...) and current keys pass through
    unchanged. A legacy token whose current key is also on the command line with the same value
    is dropped; with a different value it is a :class:`ConfigError` naming both.
    """
    translations: dict[int, Translation] = {}
    for index, token in enumerate(overrides):
        translation = translate_token(token)
        if translation is not None:
            translations[index] = translation
    if not translations:
        return list(overrides), []

    explicit: dict[str, str] = {}
    for index, token in enumerate(overrides):
        parts = _split_token(token)
        if index not in translations and parts is not None:
            explicit[parts[1]] = token
    problems: list[Problem] = []
    dropped: set[int] = set()
    for index, t in translations.items():
        current = explicit.get(t.new_key)
        if current is None:
            continue
        if _values_equal(t.new_token, current):
            dropped.add(index)
            continue
        problems.append(
            Problem(
                key=t.old_key,
                message=(
                    f"is the deprecated spelling of {t.new_key}, and the command line sets both to "
                    f"different values: `{t.old_token}` and `{current}`"
                ),
                origin="the command line",
                fix=f"keep only `{current}` (the current key) and drop `{t.old_token}`",
            )
        )
    if problems:
        raise ConfigError(problems)
    tokens = [
        translations[i].new_token if i in translations else token
        for i, token in enumerate(overrides)
        if i not in dropped
    ]
    return tokens, list(translations.values())


def translate_overrides(overrides: Sequence[str]) -> list[str]:
    """The hook run before composition: rewrite legacy keys and warn once per use."""
    tokens, translations = migrate_overrides(overrides)
    for translation in translations:
        warn(translation.message(), ConfigDeprecationWarning)
    return tokens


# --------------------------------------------------------------------------- config files


_ABSENT = object()


def _raw(cfg: DictConfig, key: str) -> object:
    """The unresolved value at ``key`` (interpolations kept as text), or ``_ABSENT``."""
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key, default=None) if parent_key else cfg
    if not isinstance(parent, DictConfig) or leaf not in parent:
        return _ABSENT
    return OmegaConf.to_container(parent, resolve=False)[leaf]


def _leaves(value: object, prefix: str) -> Iterator[tuple[str, object]]:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from _leaves(child, f"{prefix}.{key}")
    else:
        yield prefix, value


def _legacy_keys_in(cfg: DictConfig) -> Iterator[tuple[LegacyKey, str, object]]:
    """``(entry, old key, unresolved value)`` for every legacy leaf present in ``cfg``."""
    # Runs on every compose: look each parent section up once and test key membership only.
    parents: dict[str, object] = {}
    for entry in LEGACY_KEYS:
        parent_key, _, leaf = entry.old.rpartition(".")
        if parent_key not in parents:
            parents[parent_key] = OmegaConf.select(cfg, parent_key, default=None)
        parent = parents[parent_key]
        if not isinstance(parent, DictConfig) or leaf not in parent:
            continue
        value = _raw(cfg, entry.old)
        if value is _ABSENT:
            continue
        if entry.section:
            yield from ((entry, key, leaf) for key, leaf in _leaves(value, entry.old))
        else:
            yield entry, entry.old, value


@functools.lru_cache(maxsize=4)
def _shipped_defaults(engine: str) -> DictConfig:
    """Our own config for ``engine`` with no user input: tells a user-set value from a default.

    Composed only when a config file uses a legacy key, and once per engine per process.
    """
    from verl_roles.hydra_context import compose_raw

    return compose_raw("ppo_trainer", [f"model_engine={engine}"])


def _set_by(overrides: Iterable[str]) -> set[str]:
    keys = set()
    for token in overrides:
        parts = _split_token(token)
        if parts is not None and parts[2]:
            keys.add(parts[1])
    return keys


def _set_on_command_line(key: str, cli_keys: set[str]) -> bool:
    return any(key == k or key.startswith(k + ".") for k in cli_keys)


def _assign(cfg: DictConfig, key: str, value: object) -> None:
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key)
    with open_dict(parent):
        parent[leaf] = value


def _delete(cfg: DictConfig, key: str) -> None:
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key)
    with open_dict(parent):
        del parent[leaf]


def normalize_config(cfg: DictConfig, overrides: Sequence[str] = ()) -> None:
    """Move every legacy key a config file put into the composed ``cfg`` to its current key.

    ``overrides`` are the (already translated) command-line overrides: a value set there wins
    over a config file, as always in Hydra. Otherwise the legacy value is used unless the file
    also set the current key to a different value, which is an error naming both keys.
    """
    found = list(_legacy_keys_in(cfg))
    if not found:
        return
    engine = str(cfg.get(ENGINE_KEY, DEFAULT_ENGINE))
    cli_keys = _set_by(overrides)
    problems: list[Problem] = []
    moves: list[tuple[str, object]] = []
    for entry, old_key, old_value in found:
        new_key = entry.new_key_for(old_key)
        assert new_key is not None
        new_value = entry.converted(old_value)
        parent_key = new_key.rpartition(".")[0]
        if not isinstance(OmegaConf.select(cfg, parent_key, default=None), DictConfig):
            problems.append(
                Problem(
                    key=old_key,
                    message=(
                        f"is a deprecated key that now lives at {new_key}, which does not exist "
                        f"under model_engine={engine}"
                    ),
                    origin="a config file",
                    fix=f"remove {old_key} from the config file, or use the engine it belongs to",
                )
            )
            continue
        if _set_on_command_line(new_key, cli_keys):
            warn(
                f"{old_key} (value {_show(old_value)}) in a config file is a deprecated key for {new_key}; "
                f"it is ignored because the command line sets {new_key}. Rename it in the file.",
                ConfigDeprecationWarning,
            )
            continue
        current = _raw(cfg, new_key)
        default = _raw(_shipped_defaults(engine), new_key)
        if current not in (default, new_value):
            problems.append(
                Problem(
                    key=old_key,
                    message=(
                        f"is the deprecated spelling of {new_key}, and the config sets both to different "
                        f"values: {old_key}={_show(old_value)} and {new_key}={_show(current)}"
                    ),
                    origin="a config file",
                    fix=f"keep only {new_key} and remove {old_key}",
                )
            )
            continue
        moves.append((new_key, new_value))
        warn(
            f"{old_key} is a deprecated key; it now sets {new_key} (value {_show(new_value)}). "
            f"Rename it to {new_key} in your config file.",
            ConfigDeprecationWarning,
        )
    if problems:
        raise ConfigError(problems)
    for new_key, new_value in moves:
        _assign(cfg, new_key, new_value)
    for entry in LEGACY_KEYS:
        if _raw(cfg, entry.old) is not _ABSENT:
            _delete(cfg, entry.old)
