"""The points of a sweep: what each job of ``python -m verl_roles.main -m ...`` is composed with.

Hydra's basic sweeper (the default ``hydra/sweeper``) turns the command line into jobs: every override
in the order typed, a sweep (``a,b,c``, ``range(...)``, ``choice(...)``, ``glob(...)``) standing for
each of its values, a key given twice taking the place of its first mention with its last value; the
jobs are the cartesian product, numbered from 0 in that order. :func:`sweep_points` builds the same
list from the command-line model (with Hydra's public override API), so point ``#n`` here is job ``n``
of the real sweep; ``tests/test_check_sweep.py`` compares both.

The sweep's own config (Hydra's master config, which holds the launcher settings) is composed from the
same command line with every sweep left out; :func:`master_overrides` gives those overrides.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from hydra.core.override_parser.types import ChoiceSweep, Glob, RangeSweep
from hydra.errors import HydraException

from verl_roles.base.errors import ConfigError, Problem, one_paragraph
from verl_roles.base.limits import MAX_SWEEP_JOBS
from verl_roles.inputs.cmdline import CommandLine, Override


@dataclass(frozen=True)
class SweepPoint:
    """One job of a sweep: its number, every override it is composed with, and the value of each
    swept key (key as typed, without ``+``)."""

    number: int
    overrides: tuple[str, ...]
    swept: tuple[tuple[str, str], ...]

    def value_of(self, key: str) -> str:
        return dict(self.swept).get(key, "")


def _key_element(override: Override) -> str:
    """The key as Hydra's sweeper writes it back (``+key``, ``group@pkg``)."""
    assert override.parsed is not None
    return override.parsed.get_key_element()


def _choices(override: Override, options: Callable[[str], list[str]]) -> list[str]:
    """``key=value`` for each value of one override (one item unless it sweeps)."""
    parsed = override.parsed
    assert parsed is not None
    key = _key_element(override)
    if not override.is_sweep:
        return [f"{key}={parsed.get_value_element_as_str()}"]
    value = parsed.value()
    if isinstance(value, Glob):
        if not override.is_group:
            raise ConfigError([Problem(
                key=f"`{override.text}`",
                message="sweeps with glob(), which picks options of a config group, but this key is no group",
                fix="list the values (`a,b,c`), or use glob() on a group such as model_engine",
            )])
        return [f"{key}={name}" for name in value.filter(options(override.key))]
    if not parsed.is_discrete_sweep():
        raise ConfigError(
            [
                Problem(
                    key=f"`{override.text}`",
                    message="is an interval sweep, which Hydra's basic sweeper cannot run (it needs a "
                    "sweeper plugin that samples, such as Optuna)",
                    fix="list the values (`a,b,c`) or use range(start,stop,step)",
                )
            ]
        )
    try:
        return [f"{key}={value}" for value in parsed.sweep_string_iterator()]
    except (ValueError, TypeError, HydraException) as error:
        raise ConfigError([Problem(
            key=f"`{override.text}`",
            message=f"is a sweep whose values cannot be listed: {one_paragraph(str(error))}",
            fix="check its bounds and step (range(start,stop,step) needs a step other than 0), or list the "
            "values (`a,b,c`)",
        )]) from None


def hydra_setting_sweep(text: str) -> Problem:
    """The one wording for a sweep over one of Hydra's own settings (``hydra.job.chdir=true,false``)."""
    return Problem(
        key=f"`{text}`",
        message="sweeps over one of Hydra's own settings; they belong to the sweep as a whole (one folder, "
        "one launcher, one logging set-up for every job), so no job can have a value of its own",
        fix="give it one value and run one sweep per value; sweep over keys of the trainer config",
    )


def refuse_hydra_setting_sweeps(command: CommandLine) -> None:
    """Refuse, before anything is composed, a sweep over a Hydra setting (the basic sweeper would fail
    on it only after the sweep's own config is composed)."""
    problems = [hydra_setting_sweep(o.text) for o in command.overrides if o.is_hydra and o.is_sweep]
    if problems:
        raise ConfigError(problems)


def swept_keys(command: CommandLine) -> list[str]:
    """The keys a sweep varies, in the order typed (the columns of a sweep's table), without ``+``."""
    keys: list[str] = []
    for override in command.overrides:
        if override.is_sweep and override.key not in keys:
            keys.append(override.key)
    return keys


def sweep_points(command: CommandLine) -> list[SweepPoint]:
    """Every job of the sweep ``command`` describes, numbered as Hydra's basic sweeper numbers them, with
    the task overrides the sweeper hands the launcher for it (Hydra's own settings, ``hydra.*``, belong
    to the sweep's config, which every job is composed from).

    An override Hydra's grammar rejects is not expanded; composing it reports the error.
    """
    by_key: dict[str, Override] = {}
    for override in command.overrides:
        if override.is_bare_word or override.is_hydra:
            continue
        by_key[override.text if override.parsed is None else _key_element(override)] = override
    _check_size(list(by_key.values()))
    columns = [(override, [override.text] if override.parsed is None else
                _choices(override, command.tree.options)) for override in by_key.values()]
    points = []
    for number, combination in enumerate(itertools.product(*(values for _, values in columns))):
        swept = tuple(
            (override.key, chosen.partition("=")[2])
            for (override, _), chosen in zip(columns, combination, strict=True)
            if override.is_sweep
        )
        points.append(SweepPoint(number, tuple(combination), swept))
    return points


def _check_size(overrides: list[Override]) -> None:
    """Refuse a grid of more than :data:`MAX_SWEEP_JOBS` jobs before listing any value: a range is counted
    from its bounds (``range(0,1,1e-9)`` stands for a billion values)."""
    sizes = [_size(override) for override in overrides]
    jobs = math.prod(sizes)
    if jobs <= MAX_SWEEP_JOBS:
        return
    swept = [override.text for override in overrides if override.is_sweep]
    factors = [f"{size:,}" for size in sizes if size != 1]
    grid = f"{' x '.join(factors)} = {jobs:,}" if len(factors) > 1 else f"{jobs:,}"
    raise ConfigError([Problem(
        key=" ".join(f"`{text}`" for text in swept[:4]) or "the sweep",
        message=f"make a grid of {grid} jobs, more than the {MAX_SWEEP_JOBS:,} a sweep may have (verl_roles "
        "plans and checks every job before starting any, and each job is a whole training run)",
        fix="sweep fewer values (check each range's step), or split the grid into several sweeps",
    )])


def _size(override: Override) -> int:
    """How many values one override stands for, without listing a range."""
    if override.parsed is None or not override.is_sweep:
        return 1
    value = override.parsed.value()
    if isinstance(value, RangeSweep) and value.start is not None and value.stop is not None and value.step:
        span = Decimal(str(value.stop)) - Decimal(str(value.start))
        return max(0, math.ceil(span / Decimal(str(value.step))))
    if isinstance(value, ChoiceSweep):
        return max(1, len(value.list))
    return 1


def master_overrides(command: CommandLine) -> list[str]:
    """The overrides of the sweep's own config: every override but the sweeps, as typed."""
    return [o.text for o in command.overrides if not o.is_sweep and not o.is_bare_word]
