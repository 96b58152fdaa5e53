"""The one table of acceptance-suite failures we know about, each with its reason (issue 10).

``tests/test_verl_acceptance.py`` marks a case as an expected failure only when every one of its failing
steps matches a row here: the case name and step match the row's globs and verl's error contains the
row's text. A failure no row matches fails the suite, and so does a row that matches no failure in a
run (the bug it describes is gone: delete the row). The goal is an empty table.

Globs are ``fnmatch`` patterns. Case names: ``variant:<snapshot file stem>``, ``example:<file stem>``
and the special cases of the test module (``grpo``, ``lora-*``, ``slime-file``, ...). Steps:
``compose`` (verl_roles refused the overrides), ``validate_config``, ``convert <section>[ as <class>]``,
``entry_point`` and ``readback <role>.<key>``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFailure:
    cases: str
    steps: str
    error: str
    reason: str


NO_TARGET = (
    "resolved.yaml carries no `_target_` keys (issue 10, item 2): verl converts a section by its `_target_`"
)

KNOWN_FAILURES: tuple[KnownFailure, ...] = (
    KnownFailure("*", "validate_config", "config must contain _target_", NO_TARGET),
    KnownFailure("*", "convert *", "config must contain _target_", NO_TARGET),
    KnownFailure("*", "entry_point", "config must contain _target_", NO_TARGET),
    KnownFailure(
        "*",
        "convert skip as SkipManagerConfig",
        "Key 'skip' is not in struct",
        "resolved.yaml has no `skip` section; verl's trainer reads it to start fitting (SkipManager.init)",
    ),
    KnownFailure(
        "*",
        "readback model.lora.*",
        "resolved.yaml shows",
        "under dp resolved.yaml carries LoRA only as the `lora` block; verl's FSDP engine reads the flat "
        "`lora_rank`/`lora_alpha`/`target_modules`/`exclude_modules` (issue 10, item 2: derive them)",
    ),
    # verl_roles refuses launches verl 0.9.1's own tree composes (issue 11).
    KnownFailure(
        "example:*",
        "compose",
        "model_engine: has no option",
        "issue 11: verl 0.9.1's veomni and torchtitan engines are not options of our model_engine group",
    ),
    KnownFailure(
        "example:*",
        "compose",
        "is not an advantage estimator",
        "issue 11: advantage estimators verl registers itself (gdpo, optimal_token_baseline) are refused",
    ),
    KnownFailure(
        "example:*",
        "compose",
        "is not a key of the config",
        "issue 11: keys verl 0.9.1 has and verl_roles lacks (megatron.use_megatron_fsdp, turbo_config, "
        "distillation.n_gpus_per_node, profiler torch.schedule, trainer.use_v1, skip)",
    ),
    KnownFailure(
        "example:*",
        "compose",
        "is a critic override on the command line, but the critic is not used",
        "issue 11: critic keys under an algorithm without a critic are an error; verl ignores them",
    ),
    KnownFailure(
        "example:*",
        "compose",
        "actor and critic differ",
        "issue 11: the shared-topology rule refuses megatron examples that set only the actor's TP/PP",
    ),
    KnownFailure(
        "example:*",
        "compose",
        "does not divide the",
        "verl_roles' micro-batch divisibility rule refuses what verl 0.9.1 accepts "
        "(ppo_micro_batch_size_per_gpu larger than the per-rank mini batch: rollout_correction examples)",
    ),
)


def explaining_row(case: str, step: str, error: str) -> KnownFailure | None:
    """The first row that explains ``step`` of ``case`` failing with ``error``, if any."""
    for row in KNOWN_FAILURES:
        matches = fnmatch.fnmatchcase(case, row.cases) and fnmatch.fnmatchcase(step, row.steps)
        if matches and row.error in error:
            return row
    return None
