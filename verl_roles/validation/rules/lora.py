"""Validation rules of the one LoRA block (``actor_rollout_ref.model.lora`` and ``critic.model.lora``).

Listed in :data:`verl_roles.steps.pipeline.RULES`, so they run with every other rule and their problems are
reported together.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.base.errors import Problem
from verl_roles.base.layout import (
    DEFAULT_ENGINE,
    ENGINE_KEY,
    ENGINE_TABLE,
    LORA_SECTIONS,
    MEGATRON_MODULE_NAMES,
    Engine,
    engine,
)
from verl_roles.validation.rules.values import is_int, is_number

LORA_TYPES = ("lora", "vlm_lora", "canonical_lora", "dora")

# Module names of Megatron-Core layers (megatron-bridge PEFT), incl. canonical_lora's split names.
MEGATRON_MODULES = (
    "linear_qkv",
    "linear_proj",
    "linear_fc1",
    "linear_fc2",
    "linear_q",
    "linear_k",
    "linear_v",
    "linear_fc1_up",
    "linear_fc1_gate",
)

# Hugging Face (PEFT) names that never exist in a Megatron-Core model.
HF_MODULES = ("all-linear", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _lora_engines() -> list[str]:
    """The engines whose verl engine reads LoRA settings."""
    return [row.name for row in ENGINE_TABLE if row.lora_module_names is not None]


def _one_of(names: list[str]) -> str:
    """``model_engine=a, b or c``."""
    listed = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
    return f"{ENGINE_KEY}={listed}"


def _names(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, ListConfig | list):
        return [str(v) for v in value]
    return []


def _module_problems(chosen: Engine, key: str, value: object) -> Iterator[Problem]:
    """A module name of the other naming family: it would match nothing and LoRA would silently do
    nothing."""
    names = _names(value)
    engine = chosen.name
    if chosen.lora_module_names == MEGATRON_MODULE_NAMES:
        wrong = [n for n in names if n in HF_MODULES]
        expected = f"Megatron module names under model_engine={engine}: {', '.join(MEGATRON_MODULES[:4])}"
        example = "[linear_qkv,linear_proj,linear_fc1,linear_fc2]"
        other = "Hugging Face"
    else:
        wrong = [n for n in names if n in MEGATRON_MODULES]
        expected = (
            f"Hugging Face module names under model_engine={engine}: all-linear or a list such as "
            "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"
        )
        example = "all-linear"
        other = "Megatron"
    if wrong:
        yield Problem(
            key=key,
            message=(
                f"names {other} module(s) {', '.join(wrong)}, which do not exist under model_engine={engine}"
            ),
            value=OmegaConf.to_container(value) if isinstance(value, ListConfig) else value,
            show_value=True,
            expected=expected,
            fix=f"set {key}={example}, or pick the engine these names belong to",
        )


def _lora_problems(section: str, lora: DictConfig, chosen: Engine) -> Iterator[Problem]:
    # A value of the wrong type (rank 8.5, dropout "abc") is reported by the schema check; these
    # rules check what the types cannot say.
    rank = lora.get("rank")
    if chosen.lora_module_names is None and is_int(rank) and rank > 0:
        yield Problem(
            key=f"{section}.rank",
            message=f"turns LoRA on, but verl's {chosen.name} engine reads no LoRA setting: the model would "
            "train all of its weights, without an adapter",
            value=rank,
            show_value=True,
            fix=f"set {section}.rank=0, or pick an engine that has LoRA ({_one_of(_lora_engines())})",
        )
        return
    if is_int(rank) and rank < 0:
        yield Problem(
            key=f"{section}.rank",
            message="must be an integer >= 0",
            value=rank,
            show_value=True,
            expected="0 (LoRA off) or a positive integer such as 8, 16, 32 or 64",
            fix=f"set {section}.rank=0 to turn LoRA off, or e.g. {section}.rank=16",
        )
    alpha = lora.get("alpha")
    if is_int(rank) and rank > 0 and is_number(alpha) and alpha <= 0:
        yield Problem(
            key=f"{section}.alpha",
            message=f"must be a number > 0 when LoRA is on ({section}.rank={rank})",
            value=alpha,
            show_value=True,
            expected="a positive number; the adapter update is scaled by alpha / rank",
            fix=f"set e.g. {section}.alpha={2 * rank}",
        )
    dropout = lora.get("dropout")
    if is_number(dropout) and not 0 <= dropout < 1:
        yield Problem(
            key=f"{section}.dropout",
            message="must be a probability in [0, 1)",
            value=dropout,
            show_value=True,
            expected="a number with 0 <= dropout < 1",
            fix=f"set e.g. {section}.dropout=0.0",
        )
    lora_type = lora.get("type")
    if isinstance(lora_type, str) and lora_type not in LORA_TYPES:
        yield Problem(
            key=f"{section}.type",
            message="is not a known adapter type",
            value=lora_type,
            show_value=True,
            expected=f"one of {', '.join(LORA_TYPES)}",
            fix=f"set {section}.type=lora",
        )
    for field in ("target_modules", "exclude_modules"):
        yield from _module_problems(chosen, f"{section}.{field}", lora.get(field))


def lora_blocks_are_valid(cfg: DictConfig) -> Iterable[Problem]:
    """Rank, alpha, dropout, type and module names of each model's LoRA block."""
    chosen = engine(cfg.get(ENGINE_KEY, DEFAULT_ENGINE))
    for section in LORA_SECTIONS:
        lora = OmegaConf.select(cfg, section, default=None)
        if isinstance(lora, DictConfig):
            yield from _lora_problems(section, lora, chosen)
