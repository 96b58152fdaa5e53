"""Exceptions of verl_roles and the wording of what a user sees when something is wrong.

Every user mistake ends up as a :class:`ConfigError` holding one or more :class:`Problem`s. The CLI
prints each problem as one paragraph and exits non-zero; the Python API raises the same exception,
so both carry the same message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


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
        parts = [f"{self.key}: {_sentence(self.message)}"]
        if self.show_value:
            parts.append(f"Got {self.value!r}.")
        if self.expected:
            parts.append(f"Expected {_sentence(self.expected)}")
        if self.origin:
            parts.append(f"The value came from {_sentence(self.origin)}")
        if self.fix:
            parts.append(f"Fix: {_sentence(self.fix)}")
        return " ".join(parts)


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
        details += [f"and {more} more problem{'s' if more > 1 else ''}"] if more else []
        also = f" ({'; '.join(details)})" if details else ""
        return " ".join(f"{first.key}: {_sentence(first.message.rstrip().rstrip('.') + also)}".split())

    def render(self) -> str:
        if len(self.problems) == 1:
            return self.problems[0].render()
        head = f"{len(self.problems)} problems in the config:"
        body = "\n\n".join(f"{i}. {p.render()}" for i, p in enumerate(self.problems, 1))
        return f"{head}\n\n{body}"

