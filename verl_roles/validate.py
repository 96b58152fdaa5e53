"""Validation: every rule runs on the composed config and all problems are reported together.

A rule is a function ``(cfg) -> Iterable[Problem]``; :data:`RULES` lists this module's rules, and
:data:`verl_roles.pipeline.RULES` every rule the main job runs (these, the LoRA rules and the role
rules). Rules read the config; they never change it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from omegaconf import DictConfig, OmegaConf

from verl_roles.errors import ConfigError, Problem, config_files_origin
from verl_roles.hydra_adapter.nodes import missing_keys
from verl_roles.layout import ACTOR, CRITIC, ENGINE_KEY, REF, ROLLOUT, Engine, engine

Rule = Callable[[DictConfig], Iterable[Problem]]


def collect_problems(cfg: DictConfig, rules: Sequence[Rule]) -> list[Problem]:
    """Run every rule and return all the problems found, in rule order."""
    problems: list[Problem] = []
    for check in rules:
        problems.extend(check(cfg))
    return problems


def validate(cfg: DictConfig, rules: Sequence[Rule], extra: Iterable[Problem] = ()) -> None:
    """Raise :class:`ConfigError` listing every problem (``extra`` ones found by earlier steps first),
    or return when the config is valid."""
    problems = [*extra, *collect_problems(cfg, rules)]
    if problems:
        raise ConfigError([_with_file_origin(cfg, problem) for problem in problems])


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

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
ADV_ESTIMATORS = (
    "gae", "grpo", "opd", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax", "rloo", "opo",
    "grpo_passk", "gpg", "rloo_vectorized", "grpo_vectorized",
)
ROLLOUT_NAMES = ("vllm", "sglang", "trtllm", "hf")
ROLLOUT_MODES = ("async", "sync")
KL_ESTIMATORS = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full")
ROUTER_REPLAY_MODES = ("disabled", "R2", "R3")

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
    per_node, nodes = _int(cfg, "trainer.n_gpus_per_node"), _int(cfg, "trainer.nnodes")
    return per_node * nodes if per_node and nodes else None


def _model_parallel(cfg: DictConfig, role: str) -> tuple[int, str]:
    """Ranks one model replica spans for ``role`` and how that product is spelled
    (``TP*PP*CP = 2*1*1``), from the engine's model-parallel keys."""
    names = _engine(cfg).model_parallel
    sizes = [_int(cfg, f"{role}.{key}") or 1 for _, key in names]
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
                key=f"{role}.{chosen.model_parallel[0][1]}",
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
    train = _int(cfg, "data.train_batch_size")
    n = _int(cfg, f"{ROLLOUT}.n") or 1
    n_gpus = _n_gpus(cfg)
    for role in _trained_roles(cfg):
        if _get(cfg, f"{role}.use_dynamic_bsz") is True:
            continue
        mini = _int(cfg, f"{role}.ppo_mini_batch_size")
        micro = _int(cfg, f"{role}.ppo_micro_batch_size")
        per_gpu = _int(cfg, f"{role}.ppo_micro_batch_size_per_gpu")
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
            size, spelled = _model_parallel(cfg, role)
            dp = n_gpus // size if n_gpus % size == 0 else 0
            per_rank = mini * n // dp if dp else 0
            if dp and per_rank == 0:
                yield Problem(
                    key=f"{role}.ppo_mini_batch_size",
                    message=f"gives each of the {dp} data-parallel ranks no sample "
                    f"(ppo_mini_batch_size * rollout.n / dp = {mini}*{n}/{dp})",
                    fix="raise ppo_mini_batch_size or rollout.n, or use fewer GPUs",
                )
            elif dp and per_rank % per_gpu:
                yield Problem(
                    key=f"{role}.ppo_micro_batch_size_per_gpu",
                    message=f"({per_gpu}) does not divide the {per_rank} samples each data-parallel rank "
                    f"trains per mini batch (ppo_mini_batch_size * rollout.n / dp = {mini}*{n}/{dp}, "
                    f"dp = GPUs / {spelled})",
                    fix="pick a micro batch size per GPU that divides it, or change ppo_mini_batch_size",
                )
    yield from _log_prob_micro_batches(cfg)
    yield from _train_batch_fills_the_gpus(cfg, train, n, n_gpus)


def _log_prob_micro_batches(cfg: DictConfig) -> Iterable[Problem]:
    for role in (REF, ROLLOUT):
        if _get(cfg, f"{role}.log_prob_use_dynamic_bsz") is True:
            continue
        micro = _int(cfg, f"{role}.log_prob_micro_batch_size")
        per_gpu = _int(cfg, f"{role}.log_prob_micro_batch_size_per_gpu")
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
        per_gpu = _int(cfg, f"{ACTOR}.ppo_micro_batch_size_per_gpu")
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


# (key, allowed values, what it is) for values that must come from a known set.
ENUMS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (f"{ACTOR}.loss_agg_mode", LOSS_AGG_MODES, "a loss aggregation mode"),
    (f"{CRITIC}.loss_agg_mode", LOSS_AGG_MODES, "a loss aggregation mode"),
    ("algorithm.adv_estimator", ADV_ESTIMATORS, "an advantage estimator"),
    (f"{ROLLOUT}.name", ROLLOUT_NAMES, "a rollout engine"),
    (f"{ROLLOUT}.mode", ROLLOUT_MODES, "a rollout mode"),
    ("algorithm.kl_penalty", KL_ESTIMATORS, "a KL estimator (optionally with a trailing '+')"),
    (f"{ACTOR}.kl_loss_type", KL_ESTIMATORS, "a KL estimator (optionally with a trailing '+')"),
    (f"{ACTOR}.router_replay.mode", ROUTER_REPLAY_MODES, "a router replay mode"),
)


def values_come_from_their_known_set(cfg: DictConfig) -> Iterable[Problem]:
    from difflib import get_close_matches

    for key, allowed, what in ENUMS:
        value = _get(cfg, key)
        if value is _UNSET:
            continue
        text = str(value)
        if "KL estimator" in what:
            text = text.removesuffix("+")
        if text in allowed:
            continue
        close = get_close_matches(text, allowed, n=1)
        yield Problem(
            key=key,
            message=f"is not {what}",
            value=value,
            show_value=True,
            expected="one of " + ", ".join(allowed),
            fix=f"did you mean {key}={close[0]}?" if close else f"set {key} to one of the values above",
        )


# (key, lowest, lowest allowed itself?, highest allowed or None, wording)
RANGES: tuple[tuple[str, float, bool, float | None, str], ...] = (
    (f"{ACTOR}.optim.lr", 0.0, False, None, "a learning rate > 0"),
    (f"{CRITIC}.optim.lr", 0.0, False, None, "a learning rate > 0"),
    (f"{ROLLOUT}.gpu_memory_utilization", 0.0, False, 1.0, "a fraction in (0, 1]"),
    (f"{ACTOR}.clip_ratio", 0.0, True, None, "a clip ratio >= 0"),
    (f"{ACTOR}.clip_ratio_low", 0.0, True, None, "a clip ratio >= 0"),
    (f"{ACTOR}.clip_ratio_high", 0.0, True, None, "a clip ratio >= 0"),
    (f"{ACTOR}.clip_ratio_c", 1.0, False, None, "a dual-clip bound > 1 (verl asserts clip_ratio_c > 1)"),
    (f"{CRITIC}.cliprange_value", 0.0, True, None, "a value clip range >= 0"),
    (f"{ROLLOUT}.temperature", 0.0, True, None, "a temperature >= 0"),
    (f"{ROLLOUT}.n", 1.0, True, None, "at least 1 response per prompt"),
    ("data.train_batch_size", 1.0, True, None, "at least 1 prompt"),
    (f"{ACTOR}.ppo_mini_batch_size", 1.0, True, None, "at least 1 prompt"),
    (f"{ACTOR}.ppo_epochs", 1.0, True, None, "at least 1 epoch"),
    ("trainer.nnodes", 1.0, True, None, "at least 1 node"),
    ("trainer.n_gpus_per_node", 1.0, True, None, "at least 1 GPU per node"),
    (f"{ROLLOUT}.tensor_model_parallel_size", 1.0, True, None, "at least 1"),
)


def _without_note(expected: str) -> str:
    """``expected`` without a trailing explanatory note: "x > 1 (verl asserts ...)" -> "x > 1"."""
    head, sep, _ = expected.rpartition(" (")
    return head if sep and not expected.endswith("]") else expected


def values_are_in_range(cfg: DictConfig) -> Iterable[Problem]:
    for key, low, inclusive, high, expected in RANGES:
        value = _number(cfg, key)
        if value is None:
            continue
        too_low = value < low or (value == low and not inclusive)
        if too_low or (high is not None and value > high):
            yield Problem(key=key, message="is out of range", value=value, show_value=True,
                          expected=expected, fix=f"set {key} to {_without_note(expected)}")


# Paths a run cannot start without; a null or empty value here fails only after resources are up.
REQUIRED_PATHS = ("actor_rollout_ref.model.path", "data.train_files")


def required_paths_are_set(cfg: DictConfig) -> Iterable[Problem]:
    keys = list(REQUIRED_PATHS) + (["critic.model.path"] if critic_in_use(cfg) else [])
    for key in keys:
        value = _get(cfg, key)
        if value is None or (isinstance(value, str) and not value.strip()):
            yield Problem(key=key, message="is required but empty", value=value, show_value=True,
                          fix=f"set it, e.g. {key}=/path/to/it")


# This module's rules, in the order they report.
RULES: tuple[Rule, ...] = (
    values_have_their_declared_type,
    mandatory_values_are_set,
    parallel_sizes_fit_the_gpus,
    batch_sizes_are_consistent,
    values_come_from_their_known_set,
    values_are_in_range,
    required_paths_are_set,
)
