"""Exceptions of verl_roles and the wording of what a user sees when something is wrong.

Every user mistake ends up as a :class:`ConfigError` holding one or more :class:`Problem`s. The CLI
prints each problem as one paragraph and exits non-zero; the Python API raises the same exception,
so both carry the same message.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# What a terminal acts on or hides instead of showing: the C0 and C1 control characters (ESC starts the
# sequences that set a window title or clear the screen; a carriage return overwrites a line), DEL, every
# character of Unicode's Bidi_Control property (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069: they
# reorder what is shown), the invisible ones (the zero-width space, non-joiner and joiner, the word
# joiner, the byte order mark) and the line and paragraph separators, and the stand-ins Python reads a
# byte that is not UTF-8 as (a command-line argument, a file name, an environment variable in another
# encoding). Human text shows each as its escape (:func:`shown`); data escapes each in its own format's
# quoting (:func:`shell_word`; the YAML dialect's double-quoted scalars).
UNSHOWABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060\u2066-\u2069\ufeff"
    "\ud800-\udfff]"
)
_UNSHOWABLE = UNSHOWABLE
# The characters of UNSHOWABLE that YAML's emitter writes as they are (to YAML they are printable text):
# the marks and overrides of text direction and the invisible ones. The YAML dialect escapes these itself.
INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(text: str, keep: str = "") -> str:
    """``text`` as a message may show it, whoever wrote it (a key or value of the user's files, a path, an
    argument): every character of :data:`_UNSHOWABLE` is written as its escape (``\\x1b``, ``\\n``,
    ``\\u202e``; a byte that is not UTF-8 as ``\\xe9``), so nothing the user's text holds reaches the
    terminal raw. Characters in ``keep`` stay (the line breaks of a table or a listing of ours).

    The one escaping of every message: :meth:`Problem.render` and :meth:`ConfigError.headline` apply it,
    and the error boundary applies it (keeping line breaks and tabs) to everything a command prints."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            return f"\\x{code - 0xDC00:02x}"
        return _NAMED_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")

    return _UNSHOWABLE.sub(escape, text)


def shell_word(word: str) -> str:
    """``word`` as a POSIX shell reads it back exactly: ``shlex.quote``'s quoting, or, when it holds a
    character of :data:`UNSHOWABLE`, bash's ``$'...'`` quoting with each such character (and ``\\`` and
    ``'``) escaped, so a printed command line shows what it holds and pastes back as typed (a byte that
    was not UTF-8 comes back as that byte)."""
    import shlex

    if not UNSHOWABLE.search(word):
        return shlex.quote(word)

    def escape(char: str) -> str:
        code = ord(char)
        if char in "\\'":
            return "\\" + char
        if 0xDC80 <= code <= 0xDCFF:
            return f"\\x{code - 0xDC00:02x}"
        if UNSHOWABLE.match(char):
            return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"
        return char

    return "$'" + "".join(escape(char) for char in word) + "'"


def shell_line(words: Iterable[str]) -> str:
    """A command line of ``words``, each quoted by :func:`shell_word`."""
    return " ".join(shell_word(word) for word in words)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config, worded so that a user can act on it.

    ``key`` is the full dotted key (or a file name when the problem is a file), ``message`` says what
    is wrong, ``fix`` says what to do. ``value``, ``expected`` and ``origin`` are shown when known.
    """

    key: str
    message: str
    fix: str = ""
    value: object = None
    expected: str = ""
    origin: str = ""
    show_value: bool = False

    def render(self) -> str:
        # A key is one line whoever wrote it; the rest may hold the line breaks of a problem quoted whole
        # (a sweep's first failing point), and everything else a terminal acts on is escaped.
        parts = [f"{shown(self.key)}: {_sentence(self.message)}"]
        if self.show_value:
            parts.append(f"Got {self.value!r}.")
        if self.expected:
            parts.append(f"Expected {_sentence(self.expected)}")
        if self.origin:
            parts.append(f"The value came from {_sentence(self.origin)}")
        if self.fix:
            parts.append(f"Fix: {_sentence(self.fix)}")
        return shown(" ".join(parts), keep="\n")


def _sentence(text: str) -> str:
    """``text`` ending in exactly one full stop (or its own question mark)."""
    text = text.rstrip().rstrip(".")
    return text if text.endswith(("?", "!")) else f"{text}."


def one_paragraph(text: str) -> str:
    """Fold a multi-line library message into one paragraph."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def yaml_problem(error: Exception, key: str | None = None) -> Problem:
    """The one wording of a YAML file that does not parse (a syntax error, a key written twice): the
    file (or ``key``), the line and column, what is wrong, and where to fix it."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or one_paragraph(str(error))
    if mark is None:
        return Problem(
            key=key or "YAML file", message=f"is not valid YAML: {problem}", fix="fix the YAML syntax"
        )
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    return Problem(
        key=key or mark.name,
        message=f"is not valid YAML at {where}: {problem}",
        fix=f"fix the YAML syntax at {where} of {mark.name}",
    )


def counted(count: int, noun: str, plural: str = "") -> str:
    """``1 key``, ``2 keys``: a count and its noun in the number that agrees with it."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def did_you_mean(
    guesses: Sequence[str], then: str = "", *, write: Callable[[str], str] | None = None, kind: str = ""
) -> str:
    """The one "did you mean" of every message, ``then`` (what else to do) after it.

    One guess: ``did you mean `G`?``; several: ``did you mean `A` or `B`?``. With ``write`` (a guess as
    the user would type it: ``G=VALUE``), the fix says so: ``did you mean `G`? Write `G=1`;`` or ``did
    you mean one of these keys? Write `A=1` or `B=1`;`` (``kind`` names what the guesses are). Without
    a guess, ``then`` alone. The guesses come from :mod:`verl_roles.base.suggest`."""
    if not guesses:
        return then
    if write is None:
        ask = "did you mean " + " or ".join(f"`{guess}`" for guess in guesses) + "?"
        return f"{ask} {then[:1].upper()}{then[1:]}" if then else ask
    typed = " or ".join(f"`{write(guess)}`" for guess in guesses)
    if len(guesses) == 1:
        ask = f"did you mean `{guesses[0]}`? Write {typed}"
    else:
        ask = f"did you mean one of these{f' {kind}' if kind else ''}? Write {typed}"
    return f"{ask}; {then}" if then else ask


def unknown_key(
    key: str,
    where: str = "the config",
    *,
    because: str = "",
    guesses: Sequence[str] = (),
    write: Callable[[str], str] | None = None,
    fix: str = "",
    origin: str = "",
    referred_by: str = "",
) -> Problem:
    """The one wording of a key that does not exist, for every message that says so.

    ``KEY: is not a key of WHERE[; BECAUSE]. Fix: did you mean `GUESS`? FIX`` -- ``guesses`` are the keys
    the user most likely meant (:func:`verl_roles.base.suggest.near_names` and friends), ``write`` how one is
    typed (see :func:`did_you_mean`). ``referred_by``: the key is not typed as a key but referred to, by
    an interpolation at ``referred_by`` (``trainer.x: refers to `${nope}`, which is not a key of ...``).
    """
    message = f"is not a key of {where}" + (f"; {because}" if because else "")
    if referred_by:
        message = f"refers to `{key}`, which {message}"
        key = referred_by
    return Problem(key=key, message=message, fix=did_you_mean(guesses, fix, write=write, kind="keys"),
                   origin=origin)


def internal_error(error: BaseException) -> Problem:
    """What a bug of verl_roles (an exception that is not a :class:`ConfigError`) is reported as."""
    return Problem(
        key="internal error",
        message=f"verl_roles failed with {type(error).__name__}: "
        f"{one_paragraph(str(error)) or 'no message'}; this is a bug of verl_roles, not a mistake in your "
        "config",
        fix="rerun with --debug (or VERL_ROLES_DEBUG=1) to see the traceback, and report it with the command "
        "line that caused it",
    )


def config_files_origin(key: str) -> str:
    """Where a value came from when no command-line override set it."""
    return f"the config files (`verl-roles explain {key}` with the same overrides names the file)"


class VerlRolesError(Exception):
    """Base class of every error verl_roles raises on purpose."""


class ConfigError(VerlRolesError):
    """A config (or a command line, or a file a config points at) is invalid.

    Holds every problem found in one pass, so a user fixes them all in one go.
    """

    def __init__(self, problems: Iterable[Problem]):
        self.problems: tuple[Problem, ...] = tuple(problems)
        if not self.problems:
            raise ValueError("ConfigError needs at least one problem")
        super().__init__(self.render())

    def headline(self) -> str:
        """The error on one short line, for tables and summaries: the first problem's key and what is
        wrong with it, and how many more problems there are (the full text is :meth:`render`)."""
        first = self.problems[0]
        details = [f"got {first.value!r}"] if first.show_value else []
        details += [f"expected {first.expected.rstrip().rstrip('.')}"] if first.expected else []
        more = len(self.problems) - 1
        details += [f"and {counted(more, 'more problem')}"] if more else []
        also = f" ({'; '.join(details)})" if details else ""
        return shown(" ".join(f"{first.key}: {_sentence(first.message.rstrip().rstrip('.') + also)}".split()))

    def render(self) -> str:
        if len(self.problems) == 1:
            return self.problems[0].render()
        head = f"{len(self.problems)} problems in the config:"
        body = "\n\n".join(f"{i}. {p.render()}" for i, p in enumerate(self.problems, 1))
        return f"{head}\n\n{body}"


# The exit code of a command stopped by Ctrl-C (the shell's code for SIGINT).
EXIT_INTERRUPTED = 130


def caused_by_interrupt(error: BaseException) -> bool:
    """Whether Ctrl-C is behind ``error``: Python and the libraries turn a KeyboardInterrupt that lands in
    some places (a class being created, a library's own error handling) into another error, keeping the
    interrupt as its cause or context."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        stack += [current.__cause__, current.__context__]
    return False


def interrupted_at_start() -> int:
    """Ctrl-C while a command was still loading (before its error boundary): one line, exit 130."""
    print("verl_roles: interrupted (Ctrl-C) while starting; nothing was written", file=sys.stderr)
    return EXIT_INTERRUPTED


def current_folder_problem() -> Problem | None:
    """The problem of a current folder that no longer exists (deleted or moved away while a shell was in
    it): every command reads and writes relative to it, and Hydra asks for it first. None when it exists."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return Problem(
            key="the current folder",
            message="no longer exists (it was deleted or moved while this shell was in it); commands read "
            "and write relative to it, so nothing was read or written",
            fix="cd to an existing folder (e.g. `cd ~`) and run the command again",
        )
    return None
