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
from collections.abc import Callable
from dataclasses import dataclass

from hydra.core.override_parser.types import Glob
from hydra.errors import HydraException

from verl_roles.cmdline import CommandLine, Override
from verl_roles.errors import ConfigError, Problem, one_paragraph

# The most jobs one sweep may have. Every job is composed and validated before the sweep starts (a
# few tenths of a second each), so a grid of a million points would never start; such a grid is
# refused at once, before any value is listed.
MAX_SWEEP_JOBS = 1000


def _too_many(key: str, what: str) -> ConfigError:
    return ConfigError([Problem(
        key=key,
        message=f"{what}, more than the {MAX_SWEEP_JOBS} jobs one sweep may have (each is composed and "
        "checked before the sweep starts); nothing was launched or written",
        fix="split it into several sweeps (each with its own hydra.sweep.dir), or sweep fewer values",
    )])


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
        values = list(itertools.islice(parsed.sweep_string_iterator(), MAX_SWEEP_JOBS + 1))
    except (ValueError, TypeError, HydraException) as error:
        raise ConfigError([Problem(
            key=f"`{override.text}`",
            message=f"is a sweep whose values cannot be listed: {one_paragraph(str(error))}",
            fix="check its bounds and step (range(start,stop,step) needs a step other than 0), or list the "
            "values (`a,b,c`)",
        )]) from None
    if len(values) > MAX_SWEEP_JOBS:
        raise _too_many(f"`{override.text}`", f"lists more than {MAX_SWEEP_JOBS} values")
    return [f"{key}={value}" for value in values]


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
    by_key: dict[str, tuple[Override, list[str]]] = {}
    for override in command.overrides:
        if override.is_bare_word or override.is_hydra:
            continue
        if override.parsed is None:
            by_key[override.text] = (override, [override.text])
        else:
            by_key[_key_element(override)] = (override, _choices(override, command.tree.options))
    columns = list(by_key.values())
    jobs = 1
    for _, values in columns:
        jobs *= len(values)
    if jobs > MAX_SWEEP_JOBS:
        sizes = " x ".join(str(len(values)) for _, values in columns if len(values) > 1)
        raise _too_many("sweep", f"has {sizes} = {jobs} jobs")
    points = []
    for number, combination in enumerate(itertools.product(*(values for _, values in columns))):
        swept = tuple(
            (override.key, chosen.partition("=")[2])
            for (override, _), chosen in zip(columns, combination, strict=True)
            if override.is_sweep
        )
        points.append(SweepPoint(number, tuple(combination), swept))
    return points


def master_overrides(command: CommandLine) -> list[str]:
    """The overrides of the sweep's own config: every override but the sweeps, as typed."""
    return [o.text for o in command.overrides if not o.is_sweep and not o.is_bare_word]
