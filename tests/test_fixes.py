"""Every fix we print is tried (issue 34): a refusal whose fix is a line to paste (``write `KEY=VALUE```,
``did you mean `KEY=VALUE`?``) is applied as the user would paste it (the refused override replaced by the
line), and the result composes, or is refused for another, later reason: never the same problem again.

The refusals come from the bad-input catalogue (tests/bad_inputs.py), every case the Python API composes,
one test per kind. A fix that is not a line of overrides (a file to edit, a command to run, a line with a
placeholder) is not applied here; the count of applied fixes keeps the property from passing on nothing."""

from __future__ import annotations

import os
import shlex
import warnings
from pathlib import Path

import pytest
from bad_inputs import API_CASES, prepare

import verl_roles
from verl_roles.inputs.cmdline import CommandLine

# What a fix offers to paste: a backquoted line after these words, and what pasting it means (the line
# replaces the override that was refused, or is added to the command line).
REPLACE, ADD = "replace", "add"
PASTE = {"write `": REPLACE, "Write `": REPLACE, "did you mean `": REPLACE, "e.g. `": REPLACE, "add `": ADD}


def pasted_lines(fix: str) -> list[tuple[str, str]]:
    """(how, line) for each backquoted line of ``fix`` that follows an offer to paste it."""
    found = []
    for opener, how in PASTE.items():
        start = 0
        while (at := fix.find(opener, start)) != -1:
            begin = at + len(opener)
            end = fix.find("`", begin)
            if end == -1:
                break
            found.append((how, fix[begin:end]))
            start = end + 1
    return found


def override_tokens(line: str) -> list[str] | None:
    """``line`` as the overrides it types, None when it is anything else (a command, a flag, a
    placeholder such as VALUE or KEY)."""
    try:
        tokens = shlex.split(line)
    except ValueError:
        return None
    if not tokens or any(t.startswith(("-", "verl-roles", "python")) or "=" not in t for t in tokens):
        return None
    if any(word in line for word in ("VALUE", "KEY", "PATH", "<", "...")):
        return None
    return tokens


def compose(overrides: list[str], config_name: str, config_dir: str | None) -> verl_roles.ConfigError | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            verl_roles.compose(overrides, config_name=config_name, config_dir=config_dir)
        except verl_roles.ConfigError as error:
            return error
    return None


def replaced(overrides: list[str], key: str, tokens: list[str]) -> list[str]:
    """``overrides`` with the one that set ``key`` (or the section holding it; a problem about an override
    the grammar refused names it whole, in backquotes) replaced by ``tokens``."""
    typed = key.strip("`") if key.startswith("`") else None
    if typed in overrides:
        index = overrides.index(typed)
    else:
        setter = CommandLine.parse(overrides).override_for(key)
        if setter is None:
            return [*overrides, *tokens]
        index = overrides.index(setter.text)
    return [*overrides[:index], *tokens, *overrides[index + 1:]]


KINDS = sorted({case.kind for case in API_CASES})
# Kinds whose refusals offer lines to paste (the property must apply some of them there).
OFFERING = ("override",)


@pytest.mark.parametrize("kind", KINDS)
def test_every_pasted_fix_composes_or_meets_a_later_problem(kind: str, tmp_path: Path):
    applied, failures = 0, []
    for number, case in enumerate(c for c in API_CASES if c.kind == kind):
        folder = tmp_path / str(number)
        prepare(case, folder)
        config_name, overrides, config_dir = case.api_overrides()  # type: ignore[misc]
        overrides = [o.replace("{d}", str(folder)) for o in overrides]
        config_dir = config_dir.replace("{d}", str(folder)) if config_dir else None
        saved = os.getcwd()
        os.chdir(folder)
        try:
            error = compose(overrides, config_name, config_dir)
            assert error is not None, f"{case.id}: the catalogue case composes"
            first = error.problems[0]
            for how, line in pasted_lines(first.fix):
                tokens = override_tokens(line)
                if tokens is None:
                    continue  # a placeholder, a flag, a command: not a line of overrides to paste
                pasted = replaced(overrides, first.key, tokens) if how == REPLACE else [*overrides, *tokens]
                again = compose(pasted, config_name, config_dir)
                applied += 1
                if again is not None and (again.problems[0].key, again.problems[0].message) == (
                        first.key, first.message):
                    failures.append(f"{case.id}: pasting `{line}` gives the same problem again:\n{again}")
        finally:
            os.chdir(saved)
    assert not failures, "\n\n".join(failures)
    if kind in OFFERING:
        assert applied >= 5, f"only {applied} fixes of the {kind} cases were lines to paste"
