"""``verl-roles migrate [ARGS...]``: print the modern equivalent of a legacy command line.

Every argument is one token of the old command line (as the shell passed it). Legacy keys are
rewritten through the table in :mod:`verl_roles.legacy`, a deprecated ``--config-name`` becomes
the overrides that replace it, a key with no current equivalent is dropped (and named, with what
replaced it), everything else is kept as it is. The new command line goes to stdout, one token per
argument, quoted so that the shell reads back exactly the same tokens; what changed is listed on
stderr.

``--to RELEASE`` (and ``--from RELEASE``, by default the release the line chooses) rewrites the line
from one verl release to another: the line then chooses ``verl_version=<to>``; a key the other release
names another way takes that name, in either direction (verl 0.8.0's ``actor_rollout_ref.rollout.skip.*``
becomes ``skip.rollout.*`` and back: the renames ``verl-roles diff`` pairs); a key the old release has and
the new one lacks, with nothing replacing it, is an error naming each (nothing is printed on stdout). A
``--from`` the line contradicts (it chooses another release) is refused; a ``--from`` without ``--to``
keeps the line on that release. Defaults that change between the releases are not the line's to
rewrite: stderr names the ``verl-roles diff`` that lists them.

verl's launch form: ``--config-path DIR`` is read as the main job's refusal of it says
(:func:`verl_roles.legacy.config_path_move`): verl's own config folder is dropped, a folder of the
user's becomes ``--config-dir DIR``.

Every line printed composes in the main job: the migrated line is composed (a sweep point by point)
before it is printed, and a line the main job would refuse is refused here with the main job's error.
"""

from __future__ import annotations

import re
import shlex
import sys
import warnings
from dataclasses import replace

from verl_roles.api.composition import compose
from verl_roles.base import releases
from verl_roles.base.errors import UNSHOWABLE, ConfigError, Problem, shell_word
from verl_roles.commands.check_sweep import check_sweep
from verl_roles.inputs.cmdline import CommandLine, Override
from verl_roles.inputs.flags import (
    CONFIG_DIR,
    CONFIG_FLAGS,
    CONFIG_NAME,
    CONFIG_PATH,
    HYDRA_FLAGS,
    MULTIRUN,
    REQUIRED,
    Flag,
    FlagSpec,
)
from verl_roles.legacy import LEGACY_CONFIG_NAMES, config_path_move, renamed_between, translate_command
from verl_roles.messages.wording import override_grammar_problem
from verl_roles.shell.command import Command, Invocation, Words
from verl_roles.shell.reporting import say

_SAFE = re.compile(r"^[\w@%+=:,./-]+$")

FROM = FlagSpec(("--from",), REQUIRED, value_name="a verl release", metavar="RELEASE",
                help="the release the line was written for (default: the one it chooses, else the default)")
TO = FlagSpec(("--to",), REQUIRED, value_name="a verl release", metavar="RELEASE",
              help=f"rewrite the line for this verl release ({', '.join(releases.supported())})")
MIGRATE_FLAGS = (FROM, TO)


def shell_quote(token: str) -> str:
    """``token`` written so a POSIX shell reads it back unchanged; bare when nothing needs quoting, and in
    ``$'...'`` with escapes when it holds a character a terminal would not show as it is."""
    if UNSHOWABLE.search(token):
        return shell_word(token)
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
    tokens, changes, _ = _modern(args)
    return tokens, changes


def _modern(args: list[str]) -> tuple[list[str], list[str], dict[str, str]]:
    """:func:`migrate_command_line`, and each rewritten token -> the token typed."""
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
    return tokens, changes, {t.new_token: t.old_token for t in translated.translations}


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
            problems.append(override_grammar_problem(override.text, "", command))
    if problems:
        raise ConfigError(problems)


def _release_flag(invocation: Invocation, flag: FlagSpec) -> str | None:
    value = invocation.value(flag)
    if value is not None and not releases.is_supported(value):
        raise ConfigError([Problem(
            key=flag.name, message=f"is {value!r}, not a verl release verl_roles writes configs for",
            expected="one of " + ", ".join(releases.supported()), fix=f"write `{flag.name} RELEASE`")])
    return value


def _line_release(command: CommandLine, asked: bool) -> str | None:
    """The release the line chooses itself (``verl_version=X``), None when it chooses none; a line that
    sweeps the release cannot be rewritten for one (``asked``: --from or --to was given)."""
    sweep = next((o for o in command.group_overrides() if o.key == releases.VERSION_KEY and o.is_sweep), None)
    if sweep is not None and asked:
        raise ConfigError([Problem(
            key=f"`{sweep.text}`",
            message="sweeps the verl release, and --from/--to rewrite a line written for one release into a "
            "line for one other release",
            fix="migrate the line once per release, each with its own verl_version=RELEASE")])
    return command.release() if command.chose(releases.VERSION_KEY) else None


def _refuse_contradiction(old: str | None, written: str | None, command: CommandLine) -> None:
    """A ``--from`` the line itself contradicts (it chooses another release) is refused: which one the
    line's keys are spelled for cannot be told."""
    if old is None or written is None or old == written:
        return
    typed = next(o.text for o in reversed(command.group_overrides()) if o.key == releases.VERSION_KEY)
    raise ConfigError([Problem(
        key=f"--from {old}", message=f"says the line is written for verl {old}, and the line chooses verl "
        f"{written} itself (`{typed}`)",
        fix=f"drop `--from {old}` (the line's own `{typed}` says its release), or replace `{typed}` with "
        f"`{releases.choice(old)}` if the line was written for verl {old}")])


def config_dir_line(command: CommandLine) -> tuple[CommandLine, list[str]]:
    """``command`` with its ``--config-path`` rewritten as the main job's refusal of it says
    (:func:`verl_roles.legacy.config_path_move`: ``--config-dir DIR``, or dropped when DIR is verl's own
    config folder), and the change line; every earlier ``--config-path`` goes too (Hydra keeps the last).
    Refused with ``--config-dir`` also on the line: one folder would be lost."""
    move = config_path_move(command)
    if move is None:
        return command, []
    if not move.dropped and command.flag(CONFIG_DIR) is not None:
        raise ConfigError([Problem(
            key=" ".join(move.flag.tokens), message="is the folder of your primary config, and the line has "
            f"`{' '.join(command.flag(CONFIG_DIR).tokens)}` too: verl_roles takes one --config-dir",
            fix="put your config files in one folder and name it with --config-dir")])
    tokens: list[str] = []
    for item in command.items:
        if isinstance(item, Flag) and item.spec == CONFIG_PATH:
            tokens.extend(move.tokens if item is move.flag else ())
        else:
            tokens.extend(item.tokens if isinstance(item, Flag) else (item.text,))
    change = f"{' '.join(move.flag.tokens)} -> {' '.join(move.tokens) or '(dropped)'} ({move.why})"
    return CommandLine.parse(tokens), [change]


def for_release(args: list[str], old: str, new: str) -> tuple[list[str], list[str], dict[str, str]]:
    """``args`` choosing ``new`` instead of ``old``, and the change lines: a key verl ``new`` names another
    way takes that name, in either direction (:func:`verl_roles.legacy.renamed_between`); a key ``old`` has
    and ``new`` lacks that nothing replaces is a :class:`ConfigError` naming each. Third: each renamed
    token -> the token typed."""
    command = CommandLine.parse(args)
    renames: list[str] = []
    spelled: dict[str, str] = {}

    def rewrite(override: Override) -> list[str] | None:
        if override.is_group:
            return [releases.choice(new)] if override.key == releases.VERSION_KEY else None
        if override.package is not None:
            return None
        hit = renamed_between(override.key, old, new)
        if hit is None:
            return None
        entry, key = hit
        value = override.value_text
        token = f"{override.prefix}{key}" + ("" if value is None else f"={value}")
        why = (entry.why(new) if entry.applies(new) else
               f"verl {new} names it {key}; verl {old} renamed it {override.key}")
        renames.append(f"{override.text} -> {token} ({why})")
        spelled[token] = override.text
        return [token]

    rewritten = command.rewritten(rewrite)
    chosen = command.chose(releases.VERSION_KEY)
    tokens = rewritten.argv() if chosen else [*rewritten.argv(), releases.choice(new)]
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
    if chosen or old != new:
        moved = f"{releases.choice(old)} -> {releases.choice(new)} (written for verl {new})"
    else:
        moved = (f"{releases.choice(new)} added (the line is written for verl {new}; without it, it composes "
                 f"for verl {releases.DEFAULT_RELEASE})")
    return tokens, [moved, *renames], spelled


def check_composes(tokens: list[str], spelled: dict[str, str]) -> None:
    """Refuse (with the main job's own error) a line the main job would refuse: migrate prints only a line
    that composes. A sweep is checked point by point, as ``verl-roles check-sweep`` does. ``spelled``: a
    token migrate wrote -> the one typed, named where the error names the token."""
    command = CommandLine.parse(tokens)
    try:
        with warnings.catch_warnings():
            # What the main job would warn about is its to say; migrate's stderr lists migrate's changes.
            warnings.simplefilter("ignore")
            if command.sweeps:
                plan = check_sweep(command.without(MULTIRUN))
                if not plan.ok:
                    raise plan.error("the migrated line")
            else:
                compose(command.texts(), command.config_name, command.config_dir)
    except ConfigError as error:
        raise ConfigError([_typed_origin(problem, spelled) for problem in error.problems]) from error


def _typed_origin(problem: Problem, spelled: dict[str, str]) -> Problem:
    for written, typed in spelled.items():
        if f"`{written}`" in problem.origin:
            origin = problem.origin.replace(f"`{written}`", f"`{written}` (migrate's spelling of `{typed}`)")
            return replace(problem, origin=origin)
    return problem


def diff_hint(before: list[str], after: list[str]) -> str:
    """The ``verl-roles diff`` that lists what the release change does to the line's config: each side the
    line's --config-name, --config-dir and overrides (diff composes one config a side, so a sweep's values
    are left out: its defaults are what the releases may change)."""

    def side(tokens: list[str]) -> str:
        command = CommandLine.parse(tokens)
        kept = [token for flag in command.flags if flag.spec in CONFIG_FLAGS for token in flag.tokens]
        kept += [o.text for o in command.overrides if not o.is_sweep and not o.is_hydra]
        return " ".join(shell_quote(token) for token in kept)

    swept = CommandLine.parse(after).sweeps
    return (f"`verl-roles diff {side(before)} -- {side(after)}`"
            + (" (the swept keys at their defaults)" if swept else ""))


def _migrate(invocation: Invocation) -> None:
    _check(invocation.line)
    old, new = _release_flag(invocation, FROM), _release_flag(invocation, TO)
    line, path_changes = config_dir_line(invocation.line.without(*MIGRATE_FLAGS))
    written = _line_release(line, old is not None or new is not None)
    _refuse_contradiction(old, written, line)
    args = line.argv()
    old = old or written or releases.DEFAULT_RELEASE
    # A --from with no --to keeps the line on its release: the line says so from now on.
    new = new or old
    before = args if written is not None else [*args, releases.choice(old)]
    moved: list[str] = []
    spelled: dict[str, str] = {}
    if new != old or (written is None and old != releases.DEFAULT_RELEASE):
        args, moved, spelled = for_release(args, old, new)
    tokens, changes, translated = _modern(args)
    changes = path_changes + moved + changes
    check_composes(tokens, {**spelled, **translated})
    say(" ".join(shell_quote(token) for token in tokens))
    for change in changes:
        print(f"migrate: {change}", file=sys.stderr)
    if new != old:
        print(f"migrate: defaults that differ between verl {old} and verl {new} are listed by "
              f"{diff_hint(before, tokens)}", file=sys.stderr)
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
releases take the other release's name, in either direction; a key the new release lacks with no
replacement is an error, and so is a --from the line contradicts. verl's `--config-path DIR` becomes
`--config-dir DIR` (dropped when it is verl's own config folder). The line printed is composed first:
one the main job would refuse is refused here with the same error.""",
    examples=(
        "verl-roles migrate --config-name ppo_megatron_trainer actor_rollout_ref.model.lora_rank=8",
        f"verl-roles migrate --to {releases.DEFAULT_RELEASE} {releases.VERSION_KEY}="
        f"{releases.previous(releases.DEFAULT_RELEASE)} actor_rollout_ref.rollout.skip.enable=true",
    ),
)
