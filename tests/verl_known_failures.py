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
        "lora-dp-*",
        "readback model.lora.rank",
        "verl uses 0",
        "under dp resolved.yaml carries LoRA only as the `lora` block; verl's FSDP engine reads the flat "
        "`lora_rank`/`lora_alpha`/`target_modules`/`exclude_modules` (issue 10, item 2: derive them)",
    ),
)
