"""``verl-roles migrate [ARGS...]``: print the modern equivalent of a legacy command line.

Every argument is one token of the old command line (as the shell passed it). Legacy keys are
rewritten through the table in :mod:`verl_roles.legacy`, a deprecated ``--config-name`` becomes
the overrides that replace it, a key with no current equivalent is dropped (and named, with what
replaced it), everything else is kept as it is. The new command line goes to stdout, one token per
argument, quoted so that the shell reads back exactly the same tokens; what changed is listed on
stderr.
"""

from __future__ import annotations

import re
import shlex
import sys

from verl_roles.cmdline import CONFIG_NAME, HYDRA_FLAGS, CommandLine, Flag
from verl_roles.commands.reporting import say
from verl_roles.commands.shell import Command, Invocation, Words
from verl_roles.errors import ConfigError, Problem
from verl_roles.legacy import LEGACY_CONFIG_NAMES, translate_command

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


def _replacement(flag: Flag) -> list[str] | None:
    """The overrides replacing a deprecated ``--config-name`` flag, or None."""
    if flag.spec != CONFIG_NAME or flag.value is None:
        return None
    return LEGACY_CONFIG_NAMES.get(flag.value.removesuffix(".yaml"))


def migrate_command_line(args: list[str]) -> tuple[list[str], list[str]]:
    """The modern tokens for ``args`` and one line per change made."""
    translated = translate_command(CommandLine.parse(args), refuse_removed=False)
    tokens: list[str] = []
    changes: list[str] = []
    for item in translated.command.items:
        replacement = _replacement(item) if isinstance(item, Flag) else None
        if replacement is not None:
            assert isinstance(item, Flag)
            tokens.extend(replacement)
            changes.append(f"{' '.join(item.tokens)} -> {' '.join(replacement)} (deprecated config name)")
        else:
            tokens.extend(item.tokens if isinstance(item, Flag) else (item.text,))
    changes += [f"{t.old_token} -> {t.new_token} ({t.entry.reason})" for t in translated.translations]
    changes += [
        f"{r.token} dropped, no current equivalent"
        + ("" if r.harmless else " (review: the run will differ)")
        + f": {r.entry.replaced_by}"
        for r in translated.removals
    ]
    return tokens, changes


def _check(command: CommandLine) -> None:
    """What the main job would refuse before reading a key: a flag without its value, and an
    argument Hydra's override grammar rejects (migrate rewrites keys, it cannot guess those)."""
    problems = []
    for flag in command.flags:
        if flag.missing_value:
            problems.append(Problem(key=flag.typed_name, message="needs a value",
                                    fix=f"write `{flag.typed_name} VALUE`"))
    for override in command.overrides:
        if override.parsed is None and not override.is_bare_word:
            problems.append(Problem(
                key=f"`{override.text}`", message="is not a valid Hydra override",
                fix="write KEY=VALUE and quote values with spaces or brackets, e.g. `'key=[a,b]'`",
            ))
    if problems:
        raise ConfigError(problems)


def _migrate(invocation: Invocation) -> None:
    _check(invocation.line)
    tokens, changes = migrate_command_line(list(invocation.args))
    say(" ".join(shell_quote(token) for token in tokens))
    for change in changes:
        print(f"migrate: {change}", file=sys.stderr)
    if not changes:
        print("migrate: nothing to change; the command line uses no legacy key", file=sys.stderr)


COMMAND = Command(
    name="migrate",
    summary="print the modern equivalent of a legacy command line",
    action=_migrate,
    # The words are the old command line, Hydra's flags included.
    words=Words.OWN,
    passes=HYDRA_FLAGS,
    arguments="[ARGS...]",
    about="""\
Prints the modern equivalent of a legacy `python -m verl_roles.main ARGS...` (or verl trainer)
command line: flat LoRA keys become lora.*, critic.model.fsdp_config.* becomes critic.fsdp.*,
reward_model.* / custom_reward_function.* / sandbox_fusion.* become reward.*,
`--config-name ppo_megatron_trainer` becomes model_engine=megatron; a key with no current
equivalent is dropped. Changes are listed on stderr. The example prints
`model_engine=megatron actor_rollout_ref.model.lora.rank=8`.""",
    examples=("verl-roles migrate --config-name ppo_megatron_trainer actor_rollout_ref.model.lora_rank=8",),
)
