"""The one command shell: how a command is declared, and what is derived from the declaration.

A command is one :class:`Command`: its name, a one-line summary, what it does, its flags
(:class:`~verl_roles.inputs.flags.FlagSpec`: the one argument style), what its other words are, examples and
its action. Everything around the action comes from the declaration, once, here:

- the parse: the command line as one :class:`~verl_roles.inputs.cmdline.CommandLine`, and the problems of a
  flag the command does not know (with the flag meant), a flag without its value, a word it takes no;
- ``--help`` of the command (usage line, options, examples) and of ``verl-roles`` (the command table,
  :mod:`verl_roles.cli`), and ``--version``;
- the shell completion of commands and their flags (:mod:`verl_roles.commands.completion`);
- the error boundary: every command runs inside
  :func:`verl_roles.shell.reporting.run_reporting_errors` (a user mistake is one paragraph and exit
  code 2, a bug one paragraph and 70, a closed pipe or a signal never a traceback).

An action gets the :class:`Invocation` (what was typed, parsed) and returns its exit code (None for 0);
it raises :class:`~verl_roles.base.errors.ConfigError` for a user mistake and prints nothing of its own about
errors.
"""

from __future__ import annotations

import enum
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.installation import VERSION
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import HELP, NO_VALUE, FlagSpec
from verl_roles.shell.reporting import DEBUG_FLAG, run_reporting_errors, say

PROGRAM = "verl-roles"
WIDTH = 100

# Taken out of every command line by the error boundary before the command parses it.
DEBUG = FlagSpec((DEBUG_FLAG,), help="show the traceback of an error before its paragraph (same exit code)")
# The flags every command has, besides its own.
COMMON_FLAGS: tuple[FlagSpec, ...] = (HELP, DEBUG)


class Words(enum.Enum):
    """What the arguments of a command that are no flag are."""

    # Hydra overrides only (KEY=VALUE, group=option, +KEY=VALUE, ~KEY): a bare word is refused.
    OVERRIDES = "overrides"
    # Overrides, and bare words the command reads itself (keys, patterns).
    KEYS = "keys"
    # Whatever the command reads itself (diff's two sides, migrate's legacy command line).
    OWN = "own"
    # None at all.
    NONE = "none"


@dataclass(frozen=True)
class Command:
    """One command, declared once (see the module docstring for what is derived from it)."""

    name: str
    summary: str
    action: Callable[[Invocation], int | None]
    flags: tuple[FlagSpec, ...] = ()
    words: Words = Words.OVERRIDES
    # How the words are written in the usage line.
    arguments: str = "[overrides...]"
    # What the command does: a paragraph or two, shown by --help under the usage line.
    about: str = ""
    examples: tuple[str, ...] = ()
    # Usage lines when the flags alone do not tell (the command's name and its arguments, e.g. two forms).
    usage: tuple[str, ...] = ()
    # Flags of the program the command hands its other words to (launch: the main job's), parsed so that
    # their values stay with them; --help does not list them (``passes_note`` says where they are).
    passes: tuple[FlagSpec, ...] = ()
    passes_note: str = ""
    # How a user runs it; ``verl-roles NAME`` unless it is a program of its own (the snapshot script).
    program: str = ""
    # Complete its words as overrides of the main job's config (shell completion).
    completes_overrides: bool = True
    # The words it takes when they are a fixed set (completion's shells), for shell completion.
    word_choices: tuple[str, ...] = ()

    @property
    def program_name(self) -> str:
        return self.program or f"{PROGRAM} {self.name}"

    @property
    def label(self) -> str:
        """How messages name it: ``show`` for ``verl-roles show``, else the program."""
        return self.name if not self.program else self.program

    @property
    def specs(self) -> tuple[FlagSpec, ...]:
        """Every flag the command parses: its own, the common ones, those it passes on."""
        own = [*self.flags, *(flag for flag in COMMON_FLAGS if flag not in self.flags)]
        return (*own, *(flag for flag in self.passes if flag not in own))

    def run(self, args: Sequence[str]) -> int:
        """Run the command on ``args`` (what was typed after its name); return the exit code."""
        return run(self, args)


@dataclass(frozen=True)
class Invocation:
    """One run of a command: the arguments as typed (without ``--debug``) and their parse."""

    command: Command
    args: tuple[str, ...]
    line: CommandLine

    def given(self, flag: FlagSpec) -> bool:
        return self.line.flag(flag) is not None

    def value(self, flag: FlagSpec) -> str | None:
        """The value of the last ``flag`` typed, or None."""
        found = self.line.flag(flag)
        return found.value if found is not None else None

    def values(self, flag: FlagSpec) -> list[str]:
        """Every value of a repeatable ``flag``, in the order typed."""
        return [f.value for f in self.line.flags if f.spec == flag and f.value is not None]


def parse(command: Command, args: Sequence[str]) -> Invocation:
    """``args`` parsed for ``command``; a :class:`ConfigError` naming every flag or word it does not
    take (none when ``--help`` was asked for: the help says what it takes)."""
    line = CommandLine.parse(args, command.specs)
    if line.flag(HELP) is None:
        problems = usage_problems(command, line)
        if problems:
            raise ConfigError(problems)
    return Invocation(command, tuple(args), line)


def usage_problems(command: Command, line: CommandLine) -> list[Problem]:
    label, program = command.label, command.program_name
    if command.words is Words.OVERRIDES:
        return line.usage_problems(label, program)
    if command.words is Words.NONE:
        return line.flag_problems(label, program) + [
            Problem(key=word.text, message=f"is not an argument of {label}", fix=f"see `{program} --help`")
            for word in line.overrides
        ]
    if command.words is Words.KEYS:
        return line.flag_problems(label, program)
    # The command reads its words itself; every flag must still be one it takes (its own, the common ones,
    # those it passes on), with its value.
    return line.flag_problems(label, program)


def run(command: Command, args: Sequence[str]) -> int:
    """Parse ``args``, print the help or run the action, all inside the error boundary."""
    args = list(args)
    outcome: list[int] = []

    def act() -> None:
        # The boundary has taken `--debug` out of `args` by now.
        invocation = parse(command, args)
        if invocation.given(HELP):
            say(help_text(command))
            outcome.append(0)
            return
        outcome.append(int(command.action(invocation) or 0))

    code = run_reporting_errors(act, args)
    return code or (outcome[0] if outcome else 0)


# --- what --help and --version print --------------------------------------------------------------


def _wrapped(text: str, indent: str, width: int = WIDTH) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=" " * len(indent),
                         break_on_hyphens=False, break_long_words=False) or [indent.rstrip()]


def usage_lines(command: Command) -> list[str]:
    """``usage: verl-roles show [--role ROLE] [--keys GLOB]... [overrides...]``, wrapped under the
    program name; one line per form."""
    if command.usage:
        forms = list(command.usage)
    else:
        parts = [f"[{_usage_spelling(flag)}]{'...' if flag.repeatable else ''}" for flag in command.flags
                 if flag is not HELP]
        forms = [" ".join([*parts, command.arguments]).strip()]
    lines = []
    for number, form in enumerate(forms):
        head = f"{'usage:' if number == 0 else '      '} {command.program_name} "
        body = textwrap.wrap(form, WIDTH - len(head), break_on_hyphens=False, break_long_words=False)
        lines.append(head + (body[0] if body else ""))
        lines += [" " * len(head) + rest for rest in body[1:]]
    return [line.rstrip() for line in lines]


def _usage_spelling(flag: FlagSpec) -> str:
    if flag.value == NO_VALUE:
        return flag.name
    return f"{flag.name} {flag.metavar}" if flag.value != "optional" else f"{flag.name} [{flag.metavar}]"


def options_lines(flags: Sequence[FlagSpec]) -> list[str]:
    """One line per flag (wrapped): its spellings and what it does."""
    width = min(max((len(flag.spelling) for flag in flags), default=0), 26)
    lines = []
    for flag in flags:
        spelling = flag.spelling
        if len(spelling) > width:
            lines.append(f"  {spelling}")
            lines += _wrapped(flag.help, " " * (width + 4))
        else:
            lines += _wrapped(flag.help, f"  {spelling.ljust(width)}  ")
    return lines


def help_text(command: Command) -> str:
    """The ``--help`` of ``command``."""
    lines = usage_lines(command)
    if command.about:
        lines += ["", command.about.strip("\n")]
    flags = [flag for flag in (*command.flags, *COMMON_FLAGS) if flag.help]
    flags = list(dict.fromkeys(flags))
    lines += ["", "options:", *options_lines(flags)]
    if command.passes_note:
        lines += ["", *_wrapped(command.passes_note, "")]
    if command.examples:
        lines += ["", "examples:" if len(command.examples) > 1 else "example:"]
        lines += [f"  {example}" for example in command.examples]
    return "\n".join(lines)


def version_text() -> str:
    """What ``--version`` prints: our version, the verl releases we write configs for (the release seam,
    :mod:`verl_roles.base.releases`: the default one and every one ``verl_version=`` picks) and the Hydra and
    OmegaConf we compose with."""
    import hydra
    import omegaconf

    return (
        f"verl_roles {VERSION} (writes trainer configs for verl {releases.DEFAULT_RELEASE}; "
        f"{releases.VERSION_KEY}= picks one of {', '.join(releases.supported())}; "
        f"Hydra {hydra.__version__}, OmegaConf {omegaconf.__version__})"
    )
