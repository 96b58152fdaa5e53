"""Validation: every rule runs on the composed config and all problems are reported together.

A rule is a function ``(cfg) -> Iterable[Problem]``; :data:`RULES` lists this module's rules, and
:data:`verl_roles.pipeline.RULES` every rule the main job runs (these, the LoRA rules and the role
rules). A notice is a function ``(cfg) -> Iterable[str]`` whose messages are warnings (the config is
valid, but something deserves the user's attention); :data:`NOTICES` lists them. Both read the
config; they never change it.

The rules refuse what verl 0.9.1 refuses, no more: what its ``validate_config`` and its dataclasses'
``__post_init__`` / ``validate()`` reject, and what would crash its workers once started (a batch that
does not split into micro batches, a rollout engine verl does not have, a missing model path). Names
verl looks up in a registry users extend (advantage estimators, policy loss modes, reward managers)
are never refused: an unknown one is a notice naming verl's built-in list.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.errors import ConfigError, Problem, config_files_origin
from verl_roles.hydra_adapter.nodes import missing_keys, scalar_leaves
from verl_roles.layout import (
    ACTOR,
    CRITIC,
    DP,
    ENGINE_KEY,
    ENGINE_TABLE,
    MODEL_SECTIONS,
    REF,
    ROLE_SECTIONS,
    ROLES,
    ROLES_BY_NAME,
    ROLLOUT,
    Engine,
    engine,
)
from verl_roles.notices import warn
from verl_roles.schema import verl_names

Rule = Callable[[DictConfig], Iterable[Problem]]
Notice = Callable[[DictConfig], Iterable[str]]


def collect_problems(cfg: DictConfig, rules: Sequence[Rule]) -> list[Problem]:
    """Run every rule and return all the problems found, in rule order."""
    problems: list[Problem] = []
    for check in rules:
        problems.extend(check(cfg))
    return problems


def validate(
    cfg: DictConfig,
    rules: Sequence[Rule],
    extra: Iterable[Problem] = (),
    notices: Sequence[Notice] = (),
    followed: Mapping[str, str] | None = None,
) -> None:
    """Warn with every notice's messages, then raise :class:`ConfigError` listing every problem
    (``extra`` ones found by earlier steps first), or return when the config is valid.

    ``followed`` (key -> the key its value was a plain reference to, from resolution) lets a problem
    be reported where the value was set: the same problem at every role block that follows one baseline
    key is one problem at that key (see :func:`at_the_key_set`).
    """
    for check in notices:
        for message in check(cfg):
            warn(message)
    problems = [*extra, *collect_problems(cfg, rules)]
    if problems:
        problems = at_the_key_set(problems, followed or {})
        raise ConfigError([_with_file_origin(cfg, problem) for problem in problems])


def source_of(key: str, followed: Mapping[str, str]) -> str:
    """The key ``key``'s value was set at: its reference followed to the end (a role block's leaf to
    the engine baseline, the ref's to the actor's)."""
    seen = {key}
    while key in followed and followed[key] not in seen:
        key = followed[key]
        seen.add(key)
    return key


def _roles_named(keys: Sequence[str]) -> str:
    """`actor, ref and critic` for keys inside those roles' sections (the keys themselves otherwise)."""
    names = []
    for key in keys:
        role = next((name for name, section in ROLE_SECTIONS.items() if key.startswith(section + ".")), key)
        names.append(role)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _shape(problem: Problem, followed: Mapping[str, str]) -> tuple[object, ...]:
    """What makes two problems the same problem once reported at their source key (the key's own name
    in the wording does not)."""
    source = source_of(problem.key, followed)
    own = problem.key
    return (
        source,
        problem.message.replace(own, source),
        problem.fix.replace(own, source),
        problem.expected,
        repr(problem.value),
        problem.show_value,
    )


def at_the_key_set(problems: Sequence[Problem], followed: Mapping[str, str]) -> list[Problem]:
    """Problems at keys whose values follow another key, reported at the key that was set.

    Problems with the same wording at keys that all follow one source key (``TP*PP*CP = 3*1*1 ...`` at
    the actor's, the ref's and the critic's ``megatron.tensor_model_parallel_size``, all following
    ``megatron.tensor_model_parallel_size=3``) become one problem at the source, saying which roles
    follow it; one at the source itself absorbs them. A lone problem at a follower stays at its key.
    """
    groups: dict[tuple[object, ...], list[Problem]] = {}
    for problem in problems:
        groups.setdefault(_shape(problem, followed), []).append(problem)
    merged: list[Problem] = []
    done: set[int] = set()
    for problem in problems:
        if id(problem) in done:
            continue
        group = groups[_shape(problem, followed)]
        done.update(id(p) for p in group)
        source = source_of(problem.key, followed)
        followers = [p.key for p in group if p.key != source]
        if not followers:
            merged.append(problem)
        elif len(group) == 1:
            # One role's value: keep the key, and say where its value was set.
            merged.append(replace(problem, origin=problem.origin or f"`{source}`, which this key follows"))
        else:
            follow = f"{_roles_named(followers)} follow{'s' if len(followers) == 1 else ''} this value"
            message = f"{problem.message.rstrip().rstrip('.')}; {follow}"
            own = problem.key
            merged.append(replace(problem, key=source, message=message.replace(own, source),
                                  fix=problem.fix.replace(own, source)))
    return merged


def _with_file_origin(cfg: DictConfig, problem: Problem) -> Problem:
    """A problem about a config key says where its value came from; the command line, when it set the
    key, is filled in later (``wording.with_origins``), the config files otherwise."""
    if problem.origin or OmegaConf.select(cfg, problem.key, default=_ABSENT) is _ABSENT:
        return problem
    return replace(problem, origin=config_files_origin(problem.key))


_ABSENT = object()


def values_have_their_declared_type(cfg: DictConfig) -> Iterable[Problem]:
    """The typed schema (verl_roles.schema): one pass over the config, types only."""
    from verl_roles.schema import type_problems

    yield from type_problems(cfg)


def mandatory_values_are_set(cfg: DictConfig) -> Iterable[Problem]:
    """A value left at ``???`` would stop the trainer later; name it now."""
    yield from (
        Problem(
            key=key,
            message="is mandatory and has no value",
            fix=f"set it on the command line, e.g. {key}=...",
        )
        for key in missing_keys(cfg)
    )


# --- cross-field rules ---------------------------------------------------------------------------
# Facts (allowed values, batch semantics) follow verl: verl/utils/config.py::validate_config,
# verl/workers/config/actor.py and critic.py, verl/trainer/ppo/core_algos.py.

# verl's ActorConfig checks loss_agg_mode against this list (frozen from verl 0.9.1); the critic's
# loss aggregation raises on any other value when it first computes a loss.
LOSS_AGG_MODES = verl_names("loss_agg_mode")
# verl/workers/rollout/base.py _ROLLOUT_REGISTRY: (name, mode) pairs a rollout worker can start with
# (verl 0.9.1 has no hf and no sync rollout; any other pair fails its assert at worker start).
ROLLOUT_NAMES = ("vllm", "sglang", "trtllm")
ROLLOUT_MODES = ("async",)
# verl/trainer/ppo/core_algos.py kl_penalty: the estimators it computes (a trailing '+' picks the
# straight-through variant); any other name, and "full", raise NotImplementedError when the KL is
# first computed, i.e. only when it is used.
KL_ESTIMATORS = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")
# verl/workers/config/actor.py RouterReplayConfig.__post_init__ raises for any other mode.
ROUTER_REPLAY_MODES = ("disabled", "R2", "R3")
ROUTER_REPLAY_KEYS = tuple(
    f"{role}.{block}router_replay.mode"
    for role in (ACTOR, REF, CRITIC)
    for block in ("", "megatron.", "veomni.")
    if not (role == CRITIC and block == "")
)

_UNSET = object()


def _get(cfg: DictConfig, key: str) -> object:
    """The resolved value at ``key``, or ``_UNSET`` when the key is absent or cannot be resolved."""
    try:
        return OmegaConf.select(cfg, key, default=_UNSET, throw_on_missing=False)
    except Exception:  # noqa: BLE001 - a broken interpolation is reported where it is resolved
        return _UNSET


def is_int(value: object) -> bool:
    """An integer, and not a boolean (``True`` is an ``int`` to Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """An integer or a float, and not a boolean."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _int(cfg: DictConfig, key: str) -> int | None:
    value = _get(cfg, key)
    return value if is_int(value) else None


def _count(cfg: DictConfig, key: str) -> int | None:
    """The integer at ``key`` when it is a usable count or size (>= 1); anything else is None here
    (the range table reports it), so the arithmetic rules never divide by zero or a negative size."""
    value = _int(cfg, key)
    return value if value is not None and value >= 1 else None


def _number(cfg: DictConfig, key: str) -> float | None:
    value = _get(cfg, key)
    return value if is_number(value) else None


def _engine(cfg: DictConfig) -> Engine:
    return engine(_get(cfg, ENGINE_KEY))


def critic_in_use(cfg: DictConfig) -> bool:
    """verl's rule: ``critic.enable`` decides when set; otherwise only the GAE estimator trains a critic."""
    enable = _get(cfg, f"{CRITIC}.enable")
    if isinstance(enable, bool):
        return enable
    return _get(cfg, "algorithm.adv_estimator") == "gae"


def _trained_roles(cfg: DictConfig) -> list[str]:
    return [ACTOR, CRITIC] if critic_in_use(cfg) else [ACTOR]


def _n_gpus(cfg: DictConfig) -> int | None:
    per_node, nodes = _count(cfg, "trainer.n_gpus_per_node"), _count(cfg, "trainer.nnodes")
    return per_node * nodes if per_node and nodes else None


def _role_name(section: str) -> str:
    """The name of the role whose section is ``section``."""
    return next(name for name, path in ROLE_SECTIONS.items() if path == section)


def _model_parallel(cfg: DictConfig, role: str) -> tuple[int, str]:
    """Ranks one model replica spans for ``role`` and how that product is spelled
    (``TP*PP*CP = 2*1*1``), from the engine's model-parallel keys."""
    names = _engine(cfg).model_parallel_keys(_role_name(role))
    sizes = [_count(cfg, f"{role}.{key}") or 1 for _, key in names]
    product = 1
    for size in sizes:
        product *= size
    spelled = f"{'*'.join(label for label, _ in names)} = {'*'.join(map(str, sizes))}"
    return product, spelled


def parallel_sizes_fit_the_gpus(cfg: DictConfig) -> Iterable[Problem]:
    """Under an engine whose model parallel sizes divide the GPUs (megatron: every role's TP*PP*CP), the
    product must divide the GPU count (verl's validate_config)."""
    n_gpus = _n_gpus(cfg)
    chosen = _engine(cfg)
    if not chosen.divides_gpus or not n_gpus:
        return
    for role in (ACTOR, REF, CRITIC):
        size, spelled = _model_parallel(cfg, role)
        if n_gpus % size:
            yield Problem(
                key=f"{role}.{chosen.model_parallel_keys(_role_name(role))[0][1]}",
                message=f"{spelled} = {size} does not divide the {n_gpus} GPUs "
                "(trainer.n_gpus_per_node * trainer.nnodes)",
                fix="pick tensor/pipeline/context parallel sizes whose product divides the GPU count, "
                "or change trainer.n_gpus_per_node / trainer.nnodes",
            )


def batch_sizes_are_consistent(cfg: DictConfig) -> Iterable[Problem]:
    """verl's batch rules: mini <= train batch, micro set one way, and the splits divide evenly.

    ``ppo_mini_batch_size`` counts prompts like ``data.train_batch_size``; each worker trains on
    ``ppo_mini_batch_size * rollout.n / data_parallel_size`` responses, split into micro batches.
    """
    train = _count(cfg, "data.train_batch_size")
    n = _count(cfg, f"{ROLLOUT}.n") or 1
    n_gpus = _n_gpus(cfg)
    for role in _trained_roles(cfg):
        if _get(cfg, f"{role}.use_dynamic_bsz") is True:
            continue
        mini = _count(cfg, f"{role}.ppo_mini_batch_size")
        micro = _count(cfg, f"{role}.ppo_micro_batch_size")
        per_gpu = _count(cfg, f"{role}.ppo_micro_batch_size_per_gpu")
        if train is not None and mini is not None and train < mini:
            yield Problem(
                key=f"{role}.ppo_mini_batch_size",
                message=f"is {mini} prompts, more than data.train_batch_size = {train} prompts",
                expected=f"at most data.train_batch_size ({train})",
                fix=f"lower {role}.ppo_mini_batch_size or raise data.train_batch_size",
            )
        if micro is not None and per_gpu is not None:
            yield _micro_batch_set_twice(role, "ppo_micro_batch_size", micro, per_gpu)
        elif micro is not None and mini is not None and mini % micro:
            yield Problem(
                key=f"{role}.ppo_micro_batch_size",
                message=f"({micro}) does not divide ppo_mini_batch_size ({mini})",
                fix="pick a micro batch size that divides the mini batch size",
            )
        if per_gpu is not None and mini is not None and n_gpus and micro is None:
            yield from _micro_batches_per_rank(cfg, role, mini * n, f"{mini}*{n}", per_gpu, n_gpus)
    yield from _log_prob_micro_batches(cfg)
    yield from _train_batch_fills_the_gpus(cfg, train, n, n_gpus)


# Where verl 0.9.1 splits a role's mini batch at its first update (both assert; the run stops there).
SPLIT_OVER_RANKS = "verl/workers/engine_workers.py, TrainingWorker.train_mini_batch"
SPLIT_INTO_MICRO_BATCHES = "verl/workers/engine/utils.py, prepare_micro_batches"


def _micro_batches_per_rank(
    cfg: DictConfig, role: str, responses: int, spelled_responses: str, per_gpu: int, n_gpus: int
) -> Iterable[Problem]:
    """verl's engine workers split each mini batch (``ppo_mini_batch_size * rollout.n`` responses) evenly
    over the data-parallel ranks, then each rank's share into micro batches of
    ``ppo_micro_batch_size_per_gpu``; both splits are asserted at the first update, after the resources
    are up. A micro batch larger than a rank's share is not clamped: it does not divide it either."""
    size, spelled = _model_parallel(cfg, role)
    if n_gpus % size:
        return
    dp = n_gpus // size
    formula = f"ppo_mini_batch_size * rollout.n / dp = {spelled_responses}/{dp}, dp = GPUs / {spelled}"
    per_rank = responses // dp
    if per_rank == 0:
        yield Problem(
            key=f"{role}.ppo_mini_batch_size",
            message=f"gives each of the {dp} data-parallel ranks no sample ({formula})",
            fix="raise ppo_mini_batch_size or rollout.n, or use fewer GPUs",
        )
    elif responses % dp:
        yield Problem(
            key=f"{role}.ppo_mini_batch_size",
            message=f"times rollout.n ({spelled_responses} = {responses} responses) does not split evenly "
            f"over the {dp} data-parallel ranks (dp = GPUs / {spelled}); verl 0.9.1 asserts it at the first "
            f"update ({SPLIT_OVER_RANKS})",
            fix="pick ppo_mini_batch_size (or rollout.n) so that their product is a multiple of the "
            "data-parallel size",
        )
    elif per_rank % per_gpu:
        larger = ", and is larger than that share" if per_gpu > per_rank else ""
        yield Problem(
            key=f"{role}.ppo_micro_batch_size_per_gpu",
            message=f"({per_gpu}) does not divide the {per_rank} samples each data-parallel rank trains per "
            f"mini batch ({formula}){larger}; verl 0.9.1 splits a rank's share into whole micro batches and "
            f"asserts it at the first update ({SPLIT_INTO_MICRO_BATCHES}), after the resources are up",
            fix="pick a micro batch size per GPU that divides it, or change ppo_mini_batch_size",
        )


def _kl_in_reward(cfg: DictConfig) -> bool:
    return _get(cfg, "algorithm.use_kl_in_reward") is True


def _kl_loss(cfg: DictConfig) -> bool:
    return _get(cfg, f"{ACTOR}.use_kl_loss") is True


def ref_in_use(cfg: DictConfig) -> bool:
    """verl's rule: a reference policy runs for a KL term, in the reward or in the actor's loss."""
    return _kl_in_reward(cfg) or _kl_loss(cfg)


def _log_prob_micro_batches(cfg: DictConfig) -> Iterable[Problem]:
    """verl's validate_config checks these only with the actor's static batches, the ref's only when a
    reference policy runs."""
    if _get(cfg, f"{ACTOR}.use_dynamic_bsz") is True:
        return
    for role in (REF, ROLLOUT) if ref_in_use(cfg) else (ROLLOUT,):
        micro = _count(cfg, f"{role}.log_prob_micro_batch_size")
        per_gpu = _count(cfg, f"{role}.log_prob_micro_batch_size_per_gpu")
        if micro is not None and per_gpu is not None:
            yield _micro_batch_set_twice(role, "log_prob_micro_batch_size", micro, per_gpu)


def _micro_batch_set_twice(role: str, name: str, micro: int, per_gpu: int) -> Problem:
    """``<name>`` (deprecated in verl) and ``<name>_per_gpu`` both set on ``role``."""
    return Problem(
        key=f"{role}.{name}",
        message=f"and {role}.{name}_per_gpu are both set ({micro} and {per_gpu}); "
        "the micro batch is set one way only",
        fix=f"remove {role}.{name} (deprecated in verl) and keep {role}.{name}_per_gpu",
    )


def _train_batch_fills_the_gpus(
    cfg: DictConfig, train: int | None, n: int, n_gpus: int | None
) -> Iterable[Problem]:
    """verl: ``train_batch_size * rollout.n`` must split evenly over the smallest possible batch."""
    if train is None or not n_gpus or _get(cfg, f"{ACTOR}.use_dynamic_bsz") is True:
        return
    if _engine(cfg).divides_gpus:
        size, _ = _model_parallel(cfg, ACTOR)
        per_gpu = _count(cfg, f"{ACTOR}.ppo_micro_batch_size_per_gpu")
        if n_gpus % size or per_gpu is None:
            return
        minimal, how = (n_gpus // size) * per_gpu, "data-parallel size * ppo_micro_batch_size_per_gpu"
    else:
        minimal, how = n_gpus, "the GPU count"
    if (train * n) % minimal:
        yield Problem(
            key="data.train_batch_size",
            message=f"times rollout.n ({train}*{n} = {train * n} responses) does not split evenly over "
            f"{minimal} ({how})",
            fix="pick data.train_batch_size (or rollout.n) so that their product is a multiple of it",
        )


@dataclass(frozen=True)
class KnownSet:
    """A key whose value must be one of ``allowed`` (verl fails on any other), when ``used(cfg)``."""

    key: str
    allowed: tuple[str, ...]
    what: str
    used: Callable[[DictConfig], bool] = lambda cfg: True
    strip_plus: bool = False


ENUMS: tuple[KnownSet, ...] = (
    KnownSet(f"{ACTOR}.loss_agg_mode", LOSS_AGG_MODES, "a loss aggregation mode"),
    KnownSet(f"{CRITIC}.loss_agg_mode", LOSS_AGG_MODES, "a loss aggregation mode", critic_in_use),
    KnownSet(f"{ROLLOUT}.name", ROLLOUT_NAMES, "a rollout engine verl 0.9.1 has"),
    KnownSet(f"{ROLLOUT}.mode", ROLLOUT_MODES, "a rollout mode verl 0.9.1 has"),
    KnownSet("algorithm.kl_penalty", KL_ESTIMATORS, "a KL estimator (optionally with a trailing '+')",
             _kl_in_reward, strip_plus=True),
    KnownSet(f"{ACTOR}.kl_loss_type", KL_ESTIMATORS, "a KL estimator (optionally with a trailing '+')",
             _kl_loss, strip_plus=True),
    *(KnownSet(key, ROUTER_REPLAY_MODES, "a router replay mode") for key in ROUTER_REPLAY_KEYS),
)


def values_come_from_their_known_set(cfg: DictConfig) -> Iterable[Problem]:
    from difflib import get_close_matches

    for known in ENUMS:
        value = _get(cfg, known.key)
        if value is _UNSET or not known.used(cfg):
            continue
        text = str(value)
        if known.strip_plus:
            text = text.removesuffix("+")
        if value is not None and text in known.allowed:
            continue
        close = get_close_matches(text, known.allowed, n=1)
        fix = f"did you mean {known.key}={close[0]}?" if close else f"set {known.key} to one of them"
        yield Problem(
            key=known.key,
            message=f"is not {known.what}",
            value=value,
            show_value=True,
            expected="one of " + ", ".join(known.allowed),
            fix=fix,
        )


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
    return _get(cfg, "reward.reward_manager.source") == "register"


def _distillation_on(cfg: DictConfig) -> bool:
    return _get(cfg, "distillation.enabled") is True


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
    from difflib import get_close_matches

    for entry in REGISTRY_NAMES:
        value = _get(cfg, entry.key)
        if value is _UNSET or not entry.used(cfg):
            continue
        builtin = verl_names(entry.names)
        if str(value) in builtin:
            continue
        close = get_close_matches(str(value), builtin, n=1)
        hint = f" Did you mean {entry.key}={close[0]}?" if close else ""
        yield (
            f"{entry.key}={value} is not one of verl 0.9.1's built-in {entry.what}s "
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
                keys += [f"{section}.{ULYSSES}" for section in (ACTOR, REF, CRITIC)]
            for role in ROLES:
                if role.engine_block:
                    keys.append(f"{role.section}.{chosen.block(role.name)}.{size}")
                    keys += [f"{role.section}.{key}" for _, key in chosen.model_parallel_keys(role.name)
                             if key.endswith(size)]
            for key in dict.fromkeys(keys):
                yield Range(key, AT_LEAST_ONE, PARALLEL, family=f"{chosen.name}.{size}", engine=chosen.name)


def _batch_ranges() -> Iterable[Range]:
    yield Range("data.train_batch_size", AT_LEAST_ONE, "at least 1 prompt")
    yield Range("data.val_batch_size", AT_LEAST_ONE, BATCH)
    for role in (ACTOR, CRITIC):
        yield Range(f"{role}.ppo_mini_batch_size", AT_LEAST_ONE, "at least 1 prompt")
        yield Range(f"{role}.ppo_micro_batch_size", AT_LEAST_ONE, BATCH)
        yield Range(f"{role}.ppo_micro_batch_size_per_gpu", AT_LEAST_ONE, BATCH)
        yield Range(f"{role}.ppo_max_token_len_per_gpu", AT_LEAST_ONE, "at least 1 token")
        yield Range(f"{role}.ppo_epochs", AT_LEAST_ONE, "at least 1 epoch")
    for role in (REF, ROLLOUT):
        yield Range(f"{role}.log_prob_micro_batch_size", AT_LEAST_ONE, BATCH)
        yield Range(f"{role}.log_prob_micro_batch_size_per_gpu", AT_LEAST_ONE, BATCH)
        yield Range(f"{role}.log_prob_max_token_len_per_gpu", AT_LEAST_ONE, "at least 1 token")
    # verl's Megatron critic has no forward micro batch.
    yield Range(f"{CRITIC}.forward_micro_batch_size", AT_LEAST_ONE, BATCH, engine=DP.name)
    yield Range(f"{CRITIC}.forward_micro_batch_size_per_gpu", AT_LEAST_ONE, BATCH, engine=DP.name)
    yield Range(f"{CRITIC}.forward_max_token_len_per_gpu", AT_LEAST_ONE, "at least 1 token")


# The one table of numeric ranges. A null value is not checked here (the schema says whether a key
# may be null); any other number, of any key here, must be finite and inside its bound.
# Bounds where verl, or what it calls, refuses the value: torch's optimizers a negative learning rate
# (0 trains nothing, but runs), vLLM a memory fraction outside (0, 1] and a negative temperature,
# verl's policy loss a dual-clip bound <= 1. verl checks no sign of the clip ratios or the value clip
# range (a negative one clamps oddly, but runs): those only have to be finite numbers.
RANGES: tuple[Range, ...] = (
    Range(f"{ACTOR}.optim.lr", NON_NEGATIVE, "a learning rate >= 0"),
    Range(f"{CRITIC}.optim.lr", NON_NEGATIVE, "a learning rate >= 0"),
    Range(f"{ROLLOUT}.gpu_memory_utilization", FRACTION, "a fraction in (0, 1]"),
    Range(f"{ACTOR}.clip_ratio", Bound(), "a finite clip ratio"),
    Range(f"{ACTOR}.clip_ratio_low", Bound(), "a finite clip ratio"),
    Range(f"{ACTOR}.clip_ratio_high", Bound(), "a finite clip ratio"),
    Range(f"{ACTOR}.clip_ratio_c", Bound(low=1.0, low_allowed=False),
          "a dual-clip bound > 1 (verl asserts clip_ratio_c > 1)"),
    Range(f"{CRITIC}.cliprange_value", Bound(), "a finite value clip range"),
    Range(f"{ROLLOUT}.temperature", NON_NEGATIVE, "a temperature >= 0"),
    Range(f"{ROLLOUT}.n", AT_LEAST_ONE, "at least 1 response per prompt"),
    Range("trainer.nnodes", AT_LEAST_ONE, "at least 1 node"),
    Range("trainer.n_gpus_per_node", AT_LEAST_ONE, "at least 1 GPU per node"),
    *(Range(f"{ROLLOUT}.{name}", AT_LEAST_ONE, PARALLEL) for name in ROLLOUT_PARALLEL_SIZES),
    *_engine_parallel_ranges(),
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
    for row in RANGES:
        value = _number(cfg, row.key)
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


def every_value_is_usable(cfg: DictConfig) -> Iterable[Problem]:
    """Two things are never a setting, at any key: NaN (the range table already refuses it at its own
    keys), and text that is not valid Unicode (a command-line argument in another encoding), which no
    file can hold."""
    checked = {row.key for row in RANGES}
    for key, value in scalar_leaves(cfg):
        if isinstance(value, float) and math.isnan(value) and key not in checked:
            yield Problem(key=key, message="is not a number (NaN)", value=value, show_value=True,
                          fix=f"set {key} to a finite number")
        elif isinstance(value, str) and not _is_unicode(value):
            yield Problem(key=key, message="holds bytes that are not UTF-8 text", value=value,
                          show_value=True, fix=f"write {key} in UTF-8 (check the encoding of your shell)")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def deprecated_micro_batch_covers_the_gpus(cfg: DictConfig) -> Iterable[Problem]:
    """verl's ActorConfig.validate: the deprecated global ``ppo_micro_batch_size`` times the Ulysses
    size must reach the GPU count (static batches only)."""
    n_gpus = _n_gpus(cfg)
    micro = _int(cfg, f"{ACTOR}.ppo_micro_batch_size")
    if micro is None or not n_gpus or _get(cfg, f"{ACTOR}.use_dynamic_bsz") is True:
        return
    sp = (_int(cfg, f"{ACTOR}.ulysses_sequence_parallel_size") or 1) if _engine(cfg).name == "dp" else 1
    if micro * sp < n_gpus:
        yield Problem(
            key=f"{ACTOR}.ppo_micro_batch_size",
            message=f"({micro}) times ulysses_sequence_parallel_size ({sp}) is less than the {n_gpus} GPUs; "
            "verl refuses it",
            fix=f"use {ACTOR}.ppo_micro_batch_size_per_gpu instead (the global micro batch is deprecated)",
        )


def _fsdp_roles_in_use(cfg: DictConfig) -> list[tuple[str, str]]:
    """(role name, section) of each role verl builds an FSDP engine for with this config."""
    if _engine(cfg) is not DP:
        return []
    roles = [("actor", ACTOR)]
    if ref_in_use(cfg):
        roles.append(("ref", REF))
    if critic_in_use(cfg):
        roles.append(("critic", CRITIC))
    return roles


def ulysses_size_is_set_one_way(cfg: DictConfig) -> Iterable[Problem]:
    """A role-level Ulysses size above 1 and a different one in the role's FSDP block: verl 0.9.1 silently
    runs one of them (the actor's and the ref's FSDPActorConfig copies the role-level value over the
    block's; the critic's engine reads only the block). Our conf makes the block follow the role-level key,
    so they differ only when both are set."""
    for name, section in _fsdp_roles_in_use(cfg):
        block = f"{section}.{DP.block(name)}.{ULYSSES}"
        role_level, engine_value = _int(cfg, f"{section}.{ULYSSES}"), _int(cfg, block)
        if role_level is None or engine_value is None or role_level <= 1 or role_level == engine_value:
            continue
        used = role_level if name != "critic" else engine_value
        how = (
            "verl 0.9.1 copies a role-level value above 1 over the FSDP block's (FSDPActorConfig)"
            if name != "critic"
            else "verl 0.9.1's critic engine reads only the FSDP block's (FSDPCriticConfig copies nothing)"
        )
        yield Problem(
            key=f"{section}.{ULYSSES}",
            message=f"is {role_level}, but {block} is {engine_value}; {how}, so the {name} would run with "
            f"{used} whatever resolved.yaml shows",
            fix=f"set one of the two: {block} (verl's current key; the role-level key is deprecated in "
            "verl), or both to the same value",
        )


def sequence_parallel_needs_remove_padding(cfg: DictConfig) -> Iterable[Problem]:
    """verl's FSDP engine (and FSDPActorConfig.validate): Ulysses sequence parallelism needs padding
    removed from the role's model."""
    for name, section in _fsdp_roles_in_use(cfg):
        key = f"{section}.{DP.block(name)}.{ULYSSES}"
        sp = _int(cfg, key)
        model = ROLES_BY_NAME["actor" if name == "ref" else name].model
        if sp is None or sp <= 1 or _get(cfg, f"{model}.use_remove_padding") is True:
            continue
        yield Problem(
            key=key,
            message=f"is {sp}, but {model}.use_remove_padding is not true; verl's FSDP engine refuses "
            "Ulysses sequence parallelism with padding kept",
            fix=f"set {model}.use_remove_padding=true",
        )


def sampled_validation_needs_a_temperature(cfg: DictConfig) -> Iterable[Problem]:
    """verl's validate_config: sampling validation generations needs rollout.temperature > 0."""
    temperature = _number(cfg, f"{ROLLOUT}.temperature")
    if _get(cfg, f"{ROLLOUT}.val_kwargs.do_sample") is True and temperature is not None and temperature <= 0:
        yield Problem(
            key=f"{ROLLOUT}.temperature",
            message=f"is {temperature}, but {ROLLOUT}.val_kwargs.do_sample is true; verl needs a temperature "
            "> 0 to sample validation generations",
            fix=f"raise {ROLLOUT}.temperature, or set {ROLLOUT}.val_kwargs.do_sample=false",
        )


def custom_reward_function_is_named(cfg: DictConfig) -> Iterable[Problem]:
    """verl loads ``reward.custom_reward_function.name`` from the file at ``path`` and asserts it is set."""
    path = _get(cfg, "reward.custom_reward_function.path")
    if isinstance(path, str) and path and _get(cfg, "reward.custom_reward_function.name") is None:
        yield Problem(
            key="reward.custom_reward_function.name",
            message=f"is null, but reward.custom_reward_function.path is set ({path}); verl needs the "
            "name of the function to load from that file",
            fix="set reward.custom_reward_function.name, e.g. compute_score",
        )


# Paths a run cannot start without; a null or empty value here fails only after resources are up.
REQUIRED_PATHS = ("actor_rollout_ref.model.path", "data.train_files")


def required_paths_are_set(cfg: DictConfig) -> Iterable[Problem]:
    """A required path is set: not null, not blank, and (a list of files) not empty nor holding a blank."""
    keys = list(REQUIRED_PATHS) + (["critic.model.path"] if critic_in_use(cfg) else [])
    for key in keys:
        value = _get(cfg, key)
        if _blank(value) or (isinstance(value, ListConfig) and (len(value) == 0 or any(map(_blank, value)))):
            shown = OmegaConf.to_container(value) if isinstance(value, ListConfig) else value
            yield Problem(key=key, message="is required but empty", value=shown, show_value=True,
                          fix=f"set it, e.g. {key}=/path/to/it")


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def removed_checked_keys(cfg: DictConfig, deleted: Iterable[str]) -> list[Problem]:
    """The ``~KEY`` overrides (``deleted``) that removed from ``cfg`` a key the value tables check (the
    range and enum tables, the required paths), or a section holding one: verl reads each of them
    directly and stops when one is gone (``~trainer.nnodes``). Other keys may be removed (verl reads
    many with a default)."""
    checked = _checked_keys(_engine(cfg).name)
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


@cache
def _checked_keys(engine_name: str) -> tuple[str, ...]:
    """The keys of the value tables that exist with the engine ``engine_name``, sorted."""
    ranged = {row.key for row in RANGES if row.engine in ("", engine_name)}
    return tuple(sorted(ranged | {known.key for known in ENUMS} | set(REQUIRED_PATHS)))


# The sections the steps and the rules walk: each must be a mapping before any step runs.
SECTIONS: tuple[str, ...] = (
    "actor_rollout_ref", *ROLE_SECTIONS.values(), *MODEL_SECTIONS, "data", "trainer", "algorithm",
)


def section_problems(cfg: DictConfig) -> list[Problem]:
    """A section removed (``~actor_rollout_ref``) or replaced by a value (``actor_rollout_ref.actor=3``):
    one problem at the outermost such section. Checked before any step, which all read sections."""
    problems: list[Problem] = []
    for key in SECTIONS:
        if any(key.startswith(f"{problem.key}.") for problem in problems):
            continue
        node = _get(cfg, key)
        if node is _UNSET:
            problems.append(Problem(
                key=key, message="is removed, but verl reads this section",
                fix=f"keep it: drop the `~{key}` override (remove single keys inside it instead)",
            ))
        elif not isinstance(node, DictConfig):
            problems.append(Problem(
                key=key, message="is a section of the config, but it holds a single value",
                value=node, show_value=True,
                fix=f"set keys inside it, e.g. `{key}.KEY=VALUE`, not `{key}` itself",
            ))
    return problems


# This module's rules, in the order they report.
RULES: tuple[Rule, ...] = (
    values_have_their_declared_type,
    mandatory_values_are_set,
    parallel_sizes_fit_the_gpus,
    batch_sizes_are_consistent,
    values_come_from_their_known_set,
    values_are_in_range,
    every_value_is_usable,
    deprecated_micro_batch_covers_the_gpus,
    ulysses_size_is_set_one_way,
    sequence_parallel_needs_remove_padding,
    sampled_validation_needs_a_temperature,
    custom_reward_function_is_named,
    required_paths_are_set,
)

# This module's notices, in the order they warn.
NOTICES: tuple[Notice, ...] = (registry_names_are_known,)
