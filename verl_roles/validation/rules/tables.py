"""The declarative tables of allowed values: enums verl checks, names it looks up in registries users
extend (a notice, never an error), numeric ranges, and the paths a run cannot start without.

Facts (allowed values, batch semantics) follow verl: verl/utils/config.py::validate_config,
verl/workers/config/actor.py and critic.py, verl/trainer/ppo/core_algos.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.base import releases
from verl_roles.base.errors import Problem, did_you_mean
from verl_roles.base.layout import (
    ACTOR,
    DP,
    ENGINE_TABLE,
    MEGATRON,
    OPTIM_BLOCK,
    REF,
    ROLES,
    ROLLOUT,
    TRAINED_SECTIONS,
)
from verl_roles.base.releases import release_of
from verl_roles.base.suggest import LOOSE, near_names
from verl_roles.validation.rules.values import (
    UNSET,
    engine_of,
    get,
    kl_in_reward,
    kl_loss,
    number,
    role_runs,
    trained_role_rows,
)
from verl_roles.validation.schema import converted_sections, verl_names

# Name lists frozen from the chosen verl release (verl_roles.base.releases), read when a rule runs:
# verl's ActorConfig checks loss_agg_mode against one (the critic's loss aggregation raises on any other
# value when it first computes a loss); its rollout registry has the (name, mode) pairs a rollout worker
# starts with (any other pair fails its assert at worker start).
LOSS_AGG_MODES = "loss_agg_mode"
ROLLOUT_NAMES = "rollout_name"
ROLLOUT_MODES = "rollout_mode"
# verl/trainer/ppo/core_algos.py kl_penalty: the estimators it computes (a trailing '+' picks the
# straight-through variant); any other name, and "full", raise NotImplementedError when the KL is
# first computed, i.e. only when it is used.
KL_ESTIMATORS = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
# verl/workers/config/actor.py RouterReplayConfig.__post_init__ raises for any other mode.
ROUTER_REPLAY_MODES = ("disabled", "R2", "R3")
# Every place a role may carry one (its section, and its block under each engine of the layout table); a
# key the chosen engine's config does not have is not checked.
ROUTER_REPLAY_KEYS = tuple(dict.fromkeys(
    f"{role.section}.{block}router_replay.mode"
    for role in ROLES if role.engine_block
    for block in ("", *(f"{row.block(role.name)}." for row in ENGINE_TABLE))
))


@dataclass(frozen=True)
class KnownSet:
    """A key whose value must be one of ``allowed`` (verl fails on any other), when ``used(cfg)``.
    ``allowed`` is the values, or the name of one of the chosen release's name lists."""

    key: str
    allowed: tuple[str, ...] | str
    what: str
    used: Callable[[DictConfig], bool] = lambda cfg: True
    strip_plus: bool = False
    # null is accepted (the setting is off); a list's items are checked one by one.
    nullable: bool = False
    each: bool = False


def _megatron_optimizer(section: str) -> Callable[[DictConfig], bool]:
    """The role of ``section`` runs under an engine built on Megatron-Core (its optimizer config is
    McoreOptimizerConfig)."""
    name = next(role.name for role in ROLES if role.section == section)
    return lambda cfg: engine_of(cfg).mcore and role_runs(cfg, name)


ENUMS: tuple[KnownSet, ...] = (
    # Each trained role's loss aggregation, when the role is trained.
    *(KnownSet(f"{role.section}.loss_agg_mode", LOSS_AGG_MODES, "a loss aggregation mode",
               lambda cfg, name=role.name: role_runs(cfg, name)) for role in ROLES if role.trained),
    KnownSet(f"{ROLLOUT}.name", ROLLOUT_NAMES, "a rollout engine verl {release} has"),
    KnownSet(f"{ROLLOUT}.mode", ROLLOUT_MODES, "a rollout mode verl {release} has"),
    KnownSet("algorithm.kl_penalty", KL_ESTIMATORS, "a KL estimator (optionally with a trailing '+')",
             kl_in_reward, strip_plus=True),
    KnownSet(f"{ACTOR}.kl_loss_type", KL_ESTIMATORS, "a KL estimator (optionally with a trailing '+')",
             kl_loss, strip_plus=True),
    *(KnownSet(key, ROUTER_REPLAY_MODES, "a router replay mode") for key in ROUTER_REPLAY_KEYS),
    # verl's RayPPOTrainer compares trainer.resume_mode with these; any other value resumes like `auto`.
    KnownSet("trainer.resume_mode", "resume_mode",
             "a resume mode verl {release} knows (it would resume like auto on any other)"),
    # verl's Tracking asserts each logger backend; FSDPOptimizerConfig asserts a set warmup_style.
    KnownSet("trainer.logger", "tracking_backend", "a logger backend verl {release}'s Tracking has",
             each=True),
    *(KnownSet(f"{role}.optim.warmup_style", "warmup_style", "a warmup style verl {release}'s optimizer "
               "config accepts", nullable=True) for role in TRAINED_SECTIONS),
    # McoreOptimizerConfig asserts these dtypes whether or not the precision-aware optimizer reads them.
    *(KnownSet(f"{role}.optim.{name}", "mcore_optimizer_dtype",
               "a dtype verl {release}'s Megatron optimizer config accepts", _megatron_optimizer(role))
      for role in TRAINED_SECTIONS for name in ("main_grads_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")),
)


def values_come_from_their_known_set(cfg: DictConfig) -> Iterable[Problem]:
    release = release_of(cfg)
    for known in ENUMS:
        value = get(cfg, known.key)
        if value is UNSET or not known.used(cfg) or (value is None and known.nullable):
            continue
        allowed = verl_names(known.allowed, release) if isinstance(known.allowed, str) else known.allowed
        if not allowed:
            continue  # a list this release does not have: nothing to check against
        what = known.what.format(release=release)
        items = list(value) if known.each and isinstance(value, ListConfig | list) else [value]
        for item in items:
            text = str(item)
            if known.strip_plus:
                text = text.removesuffix("+")
            if item is not None and text in allowed:
                continue
            close = near_names(text, allowed, cutoff=0.6)
            fix = f"did you mean {known.key}={close[0]}?" if close else f"set {known.key} to one of them"
            yield Problem(
                key=known.key,
                message=(f"is not {what}" if item is value
                         else f"names {item!r}, which is not {what}"),
                value=_plain(value),
                show_value=True,
                expected="one of " + ", ".join(allowed),
                fix=fix,
            )


def _plain(value: object) -> object:
    return OmegaConf.to_container(value) if isinstance(value, ListConfig) else value


# --- names verl looks up in registries users extend: a notice, never an error ----------------------


@dataclass(frozen=True)
class RegistryName:
    """A key naming an entry of one of verl's registries, and how a user adds an entry."""

    key: str
    names: str
    what: str
    register_with: str
    used: Callable[[DictConfig], bool] = lambda cfg: True


def _registered_reward_manager(cfg: DictConfig) -> bool:
    return get(cfg, "reward.reward_manager.source") == "register"


def _distillation_on(cfg: DictConfig) -> bool:
    return get(cfg, "distillation.enabled") is True


REGISTRY_NAMES: tuple[RegistryName, ...] = (
    RegistryName("algorithm.adv_estimator", "adv_estimator", "advantage estimator",
                 "verl.trainer.ppo.core_algos.register_adv_est"),
    RegistryName(f"{ACTOR}.policy_loss.loss_mode", "policy_loss_mode", "policy loss mode",
                 "verl.trainer.ppo.core_algos.register_policy_loss"),
    RegistryName("distillation.distillation_loss.policy_loss_mode", "policy_loss_mode", "policy loss mode",
                 "verl.trainer.ppo.core_algos.register_policy_loss", _distillation_on),
    RegistryName("reward.reward_manager.name", "reward_manager", "reward manager",
                 "verl.experimental.reward_loop.reward_manager.register", _registered_reward_manager),
)


def registry_names_are_known(cfg: DictConfig) -> Iterable[str]:
    """A name verl does not register itself must be registered by the user's code before the trainer
    starts (verl looks it up then); say so, with verl's built-in names."""
    for entry in REGISTRY_NAMES:
        value = get(cfg, entry.key)
        if value is UNSET or not entry.used(cfg):
            continue
        builtin = verl_names(entry.names, release_of(cfg))
        if str(value) in builtin:
            continue
        close = near_names(str(value), builtin, cutoff=LOOSE)
        ask = did_you_mean([f"{entry.key}={name}" for name in close])
        hint = f" {ask[:1].upper()}{ask[1:]}" if ask else ""
        yield (
            f"{entry.key}={value} is not one of verl {release_of(cfg)}'s built-in {entry.what}s "
            f"({', '.join(builtin)}). verl looks it up when the trainer starts, so your code must "
            f"register it first (with {entry.register_with}), or the run stops there.{hint}"
        )


@dataclass(frozen=True)
class Bound:
    """The values a number may take: between ``low`` and ``high`` (None: unbounded), each end allowed
    or not, and always finite (NaN and infinities are refused: verl cannot train with them)."""

    low: float | None = None
    low_allowed: bool = True
    high: float | None = None
    high_allowed: bool = True

    def admits(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (value == self.low and not self.low_allowed)):
            return False
        return self.high is None or value < self.high or (value == self.high and self.high_allowed)


NON_NEGATIVE = Bound(low=0.0)
AT_LEAST_ONE = Bound(low=1.0)
FRACTION = Bound(low=0.0, low_allowed=False, high=1.0)
# An Adam coefficient: torch's Adam and AdamW refuse one outside [0, 1) ("Invalid beta parameter at index
# 0"; torch/optim/adam.py, checked in the optimizer's constructor, once the workers build it).
BETA = Bound(low=0.0, high=1.0, high_allowed=False)
ADAM_COEFFICIENT = "an Adam coefficient in [0, 1)"


@dataclass(frozen=True)
class Range:
    """One row of the range table: ``key`` must lie in ``bound``, said as ``expected`` ("a learning rate
    > 0"). Keys of one ``family`` copy each other by default (a role's parallel size follows the engine
    baseline): a value refused at one of them is reported once, at the first. ``engine`` is the only
    training engine the key exists with ("" for every engine)."""

    key: str
    bound: Bound
    expected: str
    family: str = ""
    engine: str = ""


# The Ulysses sequence parallel size under the FSDP engine: a role-level key (deprecated in verl) and the
# same key in the role's FSDP block, which verl's engine reads.
ULYSSES = "ulysses_sequence_parallel_size"


ROLLOUT_PARALLEL_SIZES = (
    "tensor_model_parallel_size", "data_parallel_size", "expert_parallel_size",
    "pipeline_model_parallel_size",
)
PARALLEL = "a parallel size >= 1"
BATCH = "a batch size >= 1"


def _engine_parallel_ranges() -> Iterable[Range]:
    """Every parallel size of every engine (the layout table's summary fields named ``*_parallel_size``):
    at the engine baseline, in each role's block, and at the role's own model-parallel keys. One size
    of one engine is a family: the role blocks follow the baseline, so a value refused there is not
    reported again for each role. The expert-tensor and virtual-pipeline sizes may be null (unset)."""
    for chosen in ENGINE_TABLE:
        for _, size in chosen.summary:
            if not size.endswith("_parallel_size"):
                continue
            keys = [f"{chosen.baseline}.{size}"]
            if chosen is DP and size == ULYSSES:
                # The role-level keys first: the FSDP blocks follow them.
                keys += [f"{role.section}.{ULYSSES}" for role in ROLES if role.engine_block]
            for role in ROLES:
                if role.engine_block:
                    keys.append(f"{role.section}.{chosen.block(role.name)}.{size}")
                    keys += [f"{role.section}.{key}" for _, key in chosen.model_parallel_keys(role.name)
                             if key.endswith(size)]
            for key in dict.fromkeys(keys):
                yield Range(key, AT_LEAST_ONE, PARALLEL, family=f"{chosen.name}.{size}", engine=chosen.name)


def _optimizer_ranges() -> Iterable[Range]:
    """What the optimizers refuse when the workers build them, long after Ray started: torch's Adam and
    AdamW a negative weight decay or epsilon and a coefficient outside [0, 1) (torch/optim/adam.py, the
    constructor's checks). verl hands ``optim.betas`` to the optimizer of every engine but Megatron, where
    the coefficients are ``override_optimizer_config.adam_beta1`` / ``adam_beta2`` (slime's names map
    there) and ``optim.betas`` is read by nobody (the inert table names it)."""
    for role in (*TRAINED_SECTIONS, REF):
        optim = f"{role}.{OPTIM_BLOCK}"
        yield Range(f"{optim}.weight_decay", NON_NEGATIVE, "a weight decay >= 0")
        yield Range(f"{optim}.eps", NON_NEGATIVE, "an epsilon >= 0")
        for chosen in ENGINE_TABLE:
            if chosen is MEGATRON:
                overrides = f"{optim}.override_optimizer_config"
                betas = [f"{overrides}.adam_beta1", f"{overrides}.adam_beta2"]
                yield Range(f"{overrides}.adam_eps", NON_NEGATIVE, "an epsilon >= 0", engine=chosen.name)
            else:
                betas = [f"{optim}.betas.0", f"{optim}.betas.1"]
            for key in betas:
                yield Range(key, BETA, ADAM_COEFFICIENT, engine=chosen.name)


def _batch_ranges() -> Iterable[Range]:
    yield Range("data.train_batch_size", AT_LEAST_ONE, "at least 1 prompt")
    yield Range("data.val_batch_size", AT_LEAST_ONE, BATCH)
    for role in TRAINED_SECTIONS:
        yield Range(f"{role}.ppo_mini_batch_size", AT_LEAST_ONE, "at least 1 prompt")
        yield Range(f"{role}.ppo_micro_batch_size", AT_LEAST_ONE, BATCH)
        yield Range(f"{role}.ppo_micro_batch_size_per_gpu", AT_LEAST_ONE, BATCH)
        yield Range(f"{role}.ppo_max_token_len_per_gpu", AT_LEAST_ONE, "at least 1 token")
        yield Range(f"{role}.ppo_epochs", AT_LEAST_ONE, "at least 1 epoch")
    for role in (REF, ROLLOUT):
        yield Range(f"{role}.log_prob_micro_batch_size", AT_LEAST_ONE, BATCH)
        yield Range(f"{role}.log_prob_micro_batch_size_per_gpu", AT_LEAST_ONE, BATCH)
        yield Range(f"{role}.log_prob_max_token_len_per_gpu", AT_LEAST_ONE, "at least 1 token")
    # A value model's forward passes (the critic's; the actor has none, and a key a section lacks is not
    # checked): verl's Megatron critic has no forward micro batch.
    for role in TRAINED_SECTIONS:
        yield Range(f"{role}.forward_micro_batch_size", AT_LEAST_ONE, BATCH, engine=DP.name)
        yield Range(f"{role}.forward_micro_batch_size_per_gpu", AT_LEAST_ONE, BATCH, engine=DP.name)
        yield Range(f"{role}.forward_max_token_len_per_gpu", AT_LEAST_ONE, "at least 1 token")


# The one table of numeric ranges. A null value is not checked here (the schema says whether a key
# may be null); any other number, of any key here, must be finite and inside its bound.
# Bounds where verl, or what it calls, refuses the value: torch's optimizers a negative learning rate
# (0 trains nothing, but runs), vLLM a memory fraction outside (0, 1] and a negative temperature,
# verl's policy loss a dual-clip bound <= 1. verl checks no sign of the clip ratios or the value clip
# range (a negative one clamps oddly, but runs): those only have to be finite numbers.
RANGES: tuple[Range, ...] = (
    *(Range(f"{role}.optim.lr", NON_NEGATIVE, "a learning rate >= 0") for role in TRAINED_SECTIONS),
    Range(f"{ROLLOUT}.gpu_memory_utilization", FRACTION, "a fraction in (0, 1]"),
    Range(f"{ACTOR}.clip_ratio", Bound(), "a finite clip ratio"),
    Range(f"{ACTOR}.clip_ratio_low", Bound(), "a finite clip ratio"),
    Range(f"{ACTOR}.clip_ratio_high", Bound(), "a finite clip ratio"),
    Range(f"{ACTOR}.clip_ratio_c", Bound(low=1.0, low_allowed=False),
          "a dual-clip bound > 1 (verl asserts clip_ratio_c > 1)"),
    # A value model's clip range (the actor has none).
    *(Range(f"{role}.cliprange_value", Bound(), "a finite value clip range") for role in TRAINED_SECTIONS),
    Range(f"{ROLLOUT}.temperature", NON_NEGATIVE, "a temperature >= 0"),
    Range(f"{ROLLOUT}.n", AT_LEAST_ONE, "at least 1 response per prompt"),
    Range("trainer.nnodes", AT_LEAST_ONE, "at least 1 node"),
    Range("trainer.n_gpus_per_node", AT_LEAST_ONE, "at least 1 GPU per node"),
    *(Range(f"{ROLLOUT}.{name}", AT_LEAST_ONE, PARALLEL) for name in ROLLOUT_PARALLEL_SIZES),
    *_engine_parallel_ranges(),
    *_optimizer_ranges(),
    *_batch_ranges(),
)


def _without_note(expected: str) -> str:
    """``expected`` without a trailing explanatory note: "x > 1 (verl asserts ...)" -> "x > 1"."""
    head, sep, _ = expected.rpartition(" (")
    return head if sep and not expected.endswith("]") else expected


def values_are_in_range(cfg: DictConfig) -> Iterable[Problem]:
    """Every key of :data:`RANGES` inside its bound; a value already refused in the same family is not
    reported again (the problem is where the value was set, the keys following it say nothing new)."""
    refused: dict[str, list[float]] = {}
    engine_name = engine_of(cfg).name
    for row in RANGES:
        if row.engine not in ("", engine_name):
            continue
        value = number(cfg, row.key)
        if value is None or row.bound.admits(value):
            continue
        seen = refused.setdefault(row.family or row.key, [])
        if any(_same_number(value, other) for other in seen):
            continue
        seen.append(value)
        message = "is out of range" if math.isfinite(value) else "is not a finite number"
        yield Problem(key=row.key, message=message, value=value, show_value=True,
                      expected=row.expected, fix=f"set {row.key} to {_without_note(row.expected)}")


def _same_number(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))



REQUIRED_PATHS = ("data.train_files",)


def required_paths_are_set(cfg: DictConfig) -> Iterable[Problem]:
    """A required path is set: not null, not blank, and (a list of files) not empty nor holding a blank:
    the data, and the model of every role the config trains."""
    models = [f"{role.model}.path" for role in trained_role_rows(cfg) if role.model]
    keys = [*models[:1], *REQUIRED_PATHS, *models[1:]]
    for key in keys:
        value = get(cfg, key)
        if _blank(value) or (isinstance(value, ListConfig) and (len(value) == 0 or any(map(_blank, value)))):
            shown = OmegaConf.to_container(value) if isinstance(value, ListConfig) else value
            yield Problem(key=key, message="is required but empty", value=shown, show_value=True,
                          fix=f"set it, e.g. {key}=/path/to/it")


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def removed_checked_keys(cfg: DictConfig, deleted: Iterable[str]) -> list[Problem]:
    """The ``~KEY`` overrides (``deleted``) that removed from ``cfg`` a key the value tables check (the
    range and enum tables, the required paths), or a section holding one: verl reads each of them
    directly and stops when one is gone (``~trainer.nnodes``). Other removals are
    :func:`removed_verl_keys`' to name."""
    checked = _checked_keys(engine_of(cfg).name)
    problems = []
    for key in deleted:
        needed = [k for k in checked if k == key or k.startswith(f"{key}.")]
        if needed:
            shown = "it" if needed == [key] else needed[0]
            if len(needed) > 1:
                shown += f" and {len(needed) - 1} more checked keys"
            problems.append(Problem(
                key=key,
                message=f"is removed, but verl reads {shown} (the trainer would stop on it)",
                fix=f"keep the key: drop the `~{key}` override, or give it a value with `{key}=VALUE`",
            ))
    return problems


def removed_verl_keys(cfg: DictConfig, deleted: Iterable[str]) -> list[str]:
    """Warnings for the ``~KEY`` overrides that removed a key of verl's own config from a section verl
    reads as a plain mapping (``~trainer.default_local_dir``, ``~reward``): verl's code reads some such
    keys with a default and others directly, stopping when one is gone (its ray trainer reads
    trainer.default_local_dir at the first checkpoint, maybe hours in). A field of a section verl builds
    a dataclass from gets the dataclass's default; a key the tables check is refused
    (:func:`removed_checked_keys`)."""
    engine, release = engine_of(cfg).name, release_of(cfg)
    checked = _checked_keys(engine)
    warnings = []
    for key in deleted:
        if any(k == key or k.startswith(f"{key}.") for k in checked):
            continue
        if key in releases.surface(release) and not _in_built_section(key, engine, release):
            section = key.rpartition(".")[0]
            where = f"`{section}`" if section else "the top level of its config"
            warnings.append(
                f"{key} is removed (`~{key}`), but verl's own config always has it, and verl {release} reads "
                f"{where} as a plain mapping: unless its code reads {key} with a default, the trainer stops "
                f"when it reads it. Keep the key and give it a value (`{key}=VALUE`) unless you know verl "
                "does without it.")
    return warnings


def _in_built_section(key: str, engine: str, release: str) -> bool:
    """``key`` sits in a section verl builds a dataclass from (which gives a removed field its default)."""
    section = key.rpartition(".")[0]
    return any(fnmatchcase(section, pattern) for pattern in converted_sections(engine, release))


@cache
def _checked_keys(engine_name: str) -> tuple[str, ...]:
    """The keys of the value tables that exist with the engine ``engine_name``, sorted."""
    ranged = {row.key for row in RANGES if row.engine in ("", engine_name)}
    models = {f"{role.model}.path" for role in ROLES if role.trained and role.model}
    return tuple(sorted(ranged | {known.key for known in ENUMS} | set(REQUIRED_PATHS) | models))


# The sections the steps and the rules walk: each must be a mapping before any step runs.
