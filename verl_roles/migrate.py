"""``verl-roles migrate [ARGS...]``: print the modern equivalent of a legacy command line.

Every argument is one token of the old command line (as the shell passed it). Legacy keys are
rewritten through the table in :mod:`verl_roles.legacy`, a deprecated ``--config-name`` becomes
the overrides that replace it, everything else is kept as it is. The new command line goes to
stdout, one token per argument, quoted so that the shell reads back exactly the same tokens; what
changed is listed on stderr.
"""

from __future__ import annotations

import re
import shlex
import sys

from verl_roles.cli_errors import run_reporting_errors
from verl_roles.legacy import LEGACY_CONFIG_NAMES, migrate_overrides

USAGE = """usage: verl-roles migrate [ARGS...]

Prints the modern equivalent of a legacy `python -m verl_roles.main ARGS...` (or verl trainer)
command line: flat LoRA keys become lora.*, critic.model.fsdp_config.* becomes critic.fsdp.*,
`--config-name ppo_megatron_trainer` becomes model_engine=megatron. Changes are listed on stderr.

example:
  verl-roles migrate --config-name ppo_megatron_trainer actor_rollout_ref.model.lora_rank=8
  -> model_engine=megatron actor_rollout_ref.model.lora.rank=8"""

CONFIG_NAME_FLAGS = ("--config-name", "-cn")

_SAFE = re.compile(r"^[\w@%+=:,./-]+$")


def shell_quote(token: str) -> str:
    """``token`` written so a POSIX shell reads it back unchanged; bare when nothing needs quoting."""
    if token and _SAFE.match(token) and not token.startswith("~"):
        return token
    if "'" not in token:
        return f"'{token}'"
    if not any(c in token for c in '"$`\\!'):
        return f'"{token}"'
    return shlex.quote(token)


def _config_name(args: list[str], i: int) -> tuple[str, int] | None:
    """``(name, tokens used)`` when ``args[i]`` selects the primary config."""
    token = args[i]
    for flag in CONFIG_NAME_FLAGS:
        if token == flag and i + 1 < len(args):
            return args[i + 1], 2
        if token.startswith(flag + "="):
            return token[len(flag) + 1:], 1
    return None


def migrate_command_line(args: list[str]) -> tuple[list[str], list[str]]:
    """The modern tokens for ``args`` and one line per change made."""
    tokens: list[str] = []
    changes: list[str] = []
    i = 0
    while i < len(args):
        selected = _config_name(args, i)
        if selected is not None:
            name, used = selected
            stem = name.removesuffix(".yaml")
            if stem in LEGACY_CONFIG_NAMES:
                replacement = LEGACY_CONFIG_NAMES[stem]
                tokens.extend(replacement)
                old = " ".join(args[i:i + used])
                changes.append(f"{old} -> {' '.join(replacement)} (deprecated config name)")
            else:
                tokens.extend(args[i:i + used])
            i += used
            continue
        tokens.append(args[i])
        i += 1
    tokens, translations = migrate_overrides(tokens)
    changes += [f"{t.old_token} -> {t.new_token} ({t.entry.reason})" for t in translations]
    return tokens, changes


def run(args: list[str]) -> int:
    if args and args[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    return run_reporting_errors(lambda: _migrate(list(args)), list(args))


def _migrate(args: list[str]) -> None:
    tokens, changes = migrate_command_line(args)
    print(" ".join(shell_quote(token) for token in tokens))
    for change in changes:
        print(f"migrate: {change}", file=sys.stderr)
    if not changes:
        print("migrate: nothing to change; the command line uses no legacy key", file=sys.stderr)
