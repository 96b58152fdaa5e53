"""``verl-roles migrate [ARGS...]``: print the modern equivalent of a legacy command line.

Every argument is one token of the old command line (as the shell passed it). Legacy keys are
rewritten through the table in :mod:`verl_roles.legacy`, a deprecated ``--config-name`` becomes
the overrides that replace it, a key with no current equivalent is dropped (and named, with what
replaced it), everything else is kept as it is. The new command line goes to stdout, one token per
argument, quoted so that the shell reads back exactly the same tokens; what changed is listed on
stderr.

``--to RELEASE`` (and ``--from RELEASE``, by default the release the line chooses) rewrites the line
from one verl release to another: the line then chooses ``verl_version=<to>``; a key the old release
spells another way takes the new spelling (the legacy table under the new release: verl 0.8.0's
``actor_rollout_ref.rollout.skip.*`` becomes ``skip.rollout.*``); a key the old release has and the new
one lacks, with nothing replacing it, is an error naming each (nothing is printed on stdout). Defaults
that change between the releases are not the line's to rewrite: stderr names the ``verl-roles diff``
that lists them.
"""

from __future__ import annotations

import re
import shlex
import sys

from verl_roles import releases
from verl_roles.cmdline import CommandLine
from verl_roles.commands.reporting import say
from verl_roles.commands.shell import Command, Invocation, Words
from verl_roles.errors import ConfigError, Problem
from verl_roles.flags import CONFIG_NAME, HYDRA_FLAGS, REQUIRED, Flag, FlagSpec
from verl_roles.legacy import LEGACY_CONFIG_NAMES, translate_command

_SAFE = re.compile(r"^[\w@%+=:,./-]+$")

FROM = FlagSpec(("--from",), REQUIRED, value_name="a verl release", metavar="RELEASE",
                help="the release the line was written for (default: the one it chooses, else the default)")
TO = FlagSpec(("--to",), REQUIRED, value_name="a verl release", metavar="RELEASE",
              help=f"rewrite the line for this verl release ({', '.join(releases.supported())})")
MIGRATE_FLAGS = (FROM, TO)


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
    release = translated.command.release()
    changes += [f"{t.old_token} -> {t.new_token} ({t.entry.why(release)})" for t in translated.translations]
    changes += [
        f"{r.token} dropped, no current equivalent"
        + ("" if r.harmless else " (review: the run will differ)")
        + f": {r.entry.why(release)}"
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


def _release_flag(invocation: Invocation, flag: FlagSpec) -> str | None:
    value = invocation.value(flag)
    if value is not None and not releases.is_supported(value):
        raise ConfigError([Problem(
            key=flag.name, message=f"is {value!r}, not a verl release verl_roles writes configs for",
            expected="one of " + ", ".join(releases.supported()), fix=f"write `{flag.name} RELEASE`")])
    return value


def for_release(args: list[str], old: str, new: str) -> tuple[list[str], list[str]]:
    """``args`` choosing ``new`` instead of ``old``, and the change lines; a key ``old`` has and ``new``
    lacks that nothing replaces is a :class:`ConfigError` naming each."""
    command = CommandLine.parse(args)
    rewritten = command.rewritten(
        lambda o: [releases.choice(new)] if o.is_group and o.key == releases.VERSION_KEY else None)
    chosen = command.chose(releases.VERSION_KEY)
    tokens = rewritten.argv() if chosen else [*command.argv(), releases.choice(new)]
    translated = translate_command(CommandLine.parse(tokens), refuse_removed=False).command
    problems = [
        Problem(
            key=o.key,
            message=f"is a key of verl {old} that verl {new} does not have, and nothing in verl {new} "
            "replaces it",
            origin=f"the command line override `{o.text}`",
            fix=f"remove it from the line for verl {new} (what it did there is gone, not moved), or keep the "
            f"line on verl {old}",
        )
        for o in translated.key_overrides()
        if not releases.has_key(new, o.key) and releases.has_key(old, o.key)
    ]
    if problems:
        raise ConfigError(problems)
    return tokens, [f"verl_version={old} -> {releases.choice(new)} (written for verl {new})"]


def _migrate(invocation: Invocation) -> None:
    _check(invocation.line)
    old, new = _release_flag(invocation, FROM), _release_flag(invocation, TO)
    args = invocation.line.without(*MIGRATE_FLAGS).argv()
    old = old or CommandLine.parse(args).release()
    moved: list[str] = []
    before = args if CommandLine.parse(args).chose(releases.VERSION_KEY) else [*args, releases.choice(old)]
    if new is not None and new != old:
        args, moved = for_release(args, old, new)
    tokens, changes = migrate_command_line(args)
    changes = moved + changes
    say(" ".join(shell_quote(token) for token in tokens))
    for change in changes:
        print(f"migrate: {change}", file=sys.stderr)
    if moved:
        print(f"migrate: defaults that differ between verl {old} and verl {new} are listed by "
              f"`verl-roles diff {' '.join(shell_quote(t) for t in before)} -- "
              f"{' '.join(shell_quote(t) for t in tokens)}`",
              file=sys.stderr)
    if not changes:
        print("migrate: nothing to change; the command line uses no legacy key", file=sys.stderr)


COMMAND = Command(
    name="migrate",
    summary="print the modern equivalent of a legacy command line",
    action=_migrate,
    # The words are the old command line, Hydra's flags included.
    flags=MIGRATE_FLAGS,
    words=Words.OWN,
    passes=HYDRA_FLAGS,
    arguments="[ARGS...]",
    about="""\
Prints the modern equivalent of a legacy `python -m verl_roles.main ARGS...` (or verl trainer)
command line: flat LoRA keys become lora.*, critic.model.fsdp_config.* becomes critic.fsdp.*,
reward_model.* / custom_reward_function.* / sandbox_fusion.* become reward.*,
`--config-name ppo_megatron_trainer` becomes model_engine=megatron; a key with no current
equivalent is dropped. Changes are listed on stderr. The first example prints
`model_engine=megatron actor_rollout_ref.model.lora.rank=8`. With --to RELEASE the line is rewritten
for that verl release (from --from RELEASE, default the one the line chooses): keys renamed between the
releases take the new name; a key the new release lacks with no replacement is an error.""",
    examples=(
        "verl-roles migrate --config-name ppo_megatron_trainer actor_rollout_ref.model.lora_rank=8",
        f"verl-roles migrate --to {releases.DEFAULT_RELEASE} {releases.VERSION_KEY}="
        f"{releases.previous(releases.DEFAULT_RELEASE)} actor_rollout_ref.rollout.skip.enable=true",
    ),
)
