"""Write the structured LoRA block the way verl's engines read it: the flat LoRA keys.

In our config the ``lora`` block of each model section is the one source of LoRA settings, in
``conf/`` and on the command line (the flat keys are legacy keys, translated by
:mod:`verl_roles.legacy`). verl (every supported release) reads both spellings: its FSDP and VeOmni
engines read the flat ``lora_rank`` / ``lora_alpha`` / ``target_modules`` / ``exclude_modules`` /
``lora_adapter_path`` of ``HFModelConfig``, its Megatron engine reads the block. So the pipeline step
:func:`add_flat_lora_keys`, run on the resolved config, writes the flat keys next to the block,
derived from it: verl sees one rank under both names, whatever engine it runs.

The derived keys are facts about the block, never inputs: they are added after resolution, to a
read-only config, so nothing in ``conf/`` or on the command line sets them directly.

Under Megatron the block names Megatron-Core layers (``linear_qkv``...), but the flat
``target_modules`` is also what verl's rollout engines read about the same adapter, on the Hugging Face
model they serve (SGLang's ``lora_target_modules``). So there the flat module names are the Hugging Face
names of the same layers (:data:`HF_NAMES_OF_MEGATRON`), and ``all-linear`` (verl's own value, which
SGLang receives as ``all``) when the block adapts every linear layer of a block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from omegaconf import DictConfig, ListConfig, OmegaConf, read_write

from verl_roles.base.layout import ENGINE_KEY, MEGATRON_MODULE_NAMES, MODEL_SECTIONS, engine

# Flat key -> field of the block it is derived from.
FLAT_FROM_BLOCK: dict[str, str] = {
    "lora_rank": "rank",
    "lora_alpha": "alpha",
    "target_modules": "target_modules",
    "exclude_modules": "exclude_modules",
    "lora_adapter_path": "adapter_path",
}


# Megatron-Core's layer names and the Hugging Face (Llama-family) modules each stands for.
HF_NAMES_OF_MEGATRON: dict[str, tuple[str, ...]] = {
    "linear_qkv": ("q_proj", "k_proj", "v_proj"),
    "linear_q": ("q_proj",),
    "linear_k": ("k_proj",),
    "linear_v": ("v_proj",),
    "linear_proj": ("o_proj",),
    "linear_fc1": ("gate_proj", "up_proj"),
    "linear_fc1_gate": ("gate_proj",),
    "linear_fc1_up": ("up_proj",),
    "linear_fc2": ("down_proj",),
}
# Every linear layer of a transformer block, as PEFT's shorthand names it.
ALL_LINEAR = "all-linear"
_EVERY_LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


@dataclass(frozen=True)
class DerivedKey:
    """One flat key the step wrote: its path and the block field it was derived from."""

    flat_key: str
    block_key: str


@dataclass(frozen=True)
class FlatLoraReport:
    """What the flat LoRA step wrote."""

    derived: tuple[DerivedKey, ...] = ()
    step: ClassVar[str] = "flat_lora"


def add_flat_lora_keys(resolved: DictConfig) -> FlatLoraReport:
    """Add verl's flat LoRA keys to each model section of the resolved ``resolved``, in place."""
    megatron_names = engine(resolved.get(ENGINE_KEY)).lora_module_names == MEGATRON_MODULE_NAMES
    derived = []
    for section_key in MODEL_SECTIONS:
        section = OmegaConf.select(resolved, section_key, default=None)
        if not isinstance(section, DictConfig):
            continue
        block = section.get("lora")
        if not isinstance(block, DictConfig):
            continue
        with read_write(section):
            for flat, field in FLAT_FROM_BLOCK.items():
                if field in block:
                    value = block[field]
                    if megatron_names and flat in ("target_modules", "exclude_modules"):
                        value = hf_names(value, flat == "target_modules")
                    section[flat] = _flat_value(flat, value)
                    derived.append(DerivedKey(f"{section_key}.{flat}", f"{section_key}.lora.{field}"))
    return FlatLoraReport(tuple(derived))


def hf_names(value: object, targets: bool) -> object:
    """Megatron-Core module names as the Hugging Face modules they stand for (a name of no Megatron layer
    is kept); for the targets, every linear layer is ``all-linear``."""
    if not isinstance(value, ListConfig | list | tuple):
        return value
    names: list[str] = []
    for name in map(str, value):
        for hf in HF_NAMES_OF_MEGATRON.get(name, (name,)):
            if hf not in names:
                names.append(hf)
    if targets and set(names) == _EVERY_LINEAR:
        return ALL_LINEAR
    return names


def _flat_value(flat: str, value: object) -> object:
    if flat == "exclude_modules":
        return exclude_pattern(value)
    if flat == "lora_alpha" and isinstance(value, float) and value.is_integer():
        # verl declares the flat alpha an int; 16.0 and 16 mean the same scale.
        return int(value)
    if isinstance(value, ListConfig):
        return list(value)
    return value


def exclude_pattern(value: object) -> object:
    """The block's ``exclude_modules`` as verl's flat key takes it: null or one regular expression.

    verl declares the flat key ``Optional[str]``, and PEFT reads a string as a regular expression that
    must match a module's whole name. A list of names (PEFT: a module is excluded when its name is one
    of them or ends with ``.<name>``) becomes the expression that matches exactly those modules; an
    empty list is null (nothing excluded); a string is already an expression.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, ListConfig | Sequence) and not isinstance(value, str):
        names = [str(name) for name in value]
        if not names:
            return None
        return r"(.*\.)?(" + "|".join(re.escape(name) for name in names) + ")"
    return value
