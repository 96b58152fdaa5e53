"""Write Megatron's ``sequence_parallel`` as verl uses it: off wherever the tensor parallel size is 1.

verl's ``McoreEngineConfig`` (in every release verl_roles supports) turns ``sequence_parallel`` off, with a
warning, when its ``tensor_model_parallel_size`` is 1 (sequence parallelism splits along the tensor-parallel
group; with none there is nothing to split). Our Megatron baseline defaults it to true, as verl's YAML
does, so without this step resolved.yaml and roles/*.yaml would show ``true`` for a role verl runs without it.

The pipeline step :func:`write_effective_sequence_parallel`, run on the resolved, validated config, writes
the value verl uses into every Megatron role block (each block verl converts with McoreEngineConfig), and
the same rule into the ``megatron`` baseline (what a role that follows it gets; slime's export compares
role blocks with it).
It warns only when the user asked for sequence parallelism on the command line (the key a role block
follows was set to true there) and a role has tensor parallel size 1; the default run stays quiet,
while verl warns on every run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from omegaconf import DictConfig, OmegaConf, read_write

from verl_roles.base.layout import ENGINE_KEY, ROLES, engine
from verl_roles.base.notices import warn
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.validation.rules.runner import source_of

SEQUENCE_PARALLEL = "sequence_parallel"
TENSOR_PARALLEL = "tensor_model_parallel_size"
# Why the step wrote false, as `verl-roles explain` and the warning word it.
TURNED_OFF = "verl turns sequence_parallel off at tensor_model_parallel_size 1 (McoreEngineConfig)"


@dataclass(frozen=True)
class TurnedOff:
    """One role block whose ``sequence_parallel`` the step set to false, and the key the true came from."""

    key: str
    tensor_parallel_key: str
    source: str
    role_block: bool = True


@dataclass(frozen=True)
class SequenceParallelReport:
    """What the sequence-parallel step wrote."""

    turned_off: tuple[TurnedOff, ...] = ()
    step: ClassVar[str] = "sequence_parallel"


def megatron_role_blocks(cfg: DictConfig) -> list[str]:
    """The key paths of the Megatron-Core role blocks of ``cfg`` (none under an engine whose layout row
    is not ``mcore``)."""
    chosen = engine(cfg.get(ENGINE_KEY))
    if not chosen.mcore:
        return []
    return [f"{role.section}.{chosen.block(role.name)}" for role in ROLES if role.engine_block]


def write_effective_sequence_parallel(
    resolved: DictConfig, command: CommandLine, followed: Mapping[str, str]
) -> SequenceParallelReport:
    """Set ``sequence_parallel`` to false, in place, in each Megatron role block of ``resolved`` whose
    tensor parallel size is 1; warn when the command line asked for it there.

    ``followed`` maps a key to the key its value was a plain reference to (from resolution): the true a
    role block holds is traced to the key that set it.
    """
    turned_off = []
    role_blocks = megatron_role_blocks(resolved)
    baseline = engine(resolved.get(ENGINE_KEY)).baseline
    for block_key in [baseline, *role_blocks] if role_blocks else []:
        block = OmegaConf.select(resolved, block_key, default=None)
        if not isinstance(block, DictConfig) or block.get(SEQUENCE_PARALLEL) is not True:
            continue
        if block.get(TENSOR_PARALLEL) != 1:
            continue
        key = f"{block_key}.{SEQUENCE_PARALLEL}"
        with read_write(block):
            block[SEQUENCE_PARALLEL] = False
        tensor_parallel_key = f"{block_key}.{TENSOR_PARALLEL}"
        turned_off.append(
            TurnedOff(key, tensor_parallel_key, source_of(key, followed), block_key in role_blocks)
        )
    _warn_when_asked_for(turned_off, command)
    return SequenceParallelReport(tuple(turned_off))


def _warn_when_asked_for(turned_off: list[TurnedOff], command: CommandLine) -> None:
    set_on_command_line = set(command.set_keys())
    asked = [entry for entry in turned_off if entry.role_block and entry.source in set_on_command_line]
    if not asked:
        return
    keys = ", ".join(dict.fromkeys(entry.source for entry in asked))
    blocks = ", ".join(entry.key for entry in asked)
    warn(
        f"{keys}=true has no effect on {blocks}: {TURNED_OFF}, so resolved.yaml writes false there. "
        "Sequence parallelism needs tensor_model_parallel_size > 1."
    )
