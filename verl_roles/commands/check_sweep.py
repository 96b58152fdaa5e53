"""``verl-roles check-sweep [overrides...]``: every point of a sweep composed and validated in one process,
before anything is launched; nothing is written.

The points are the jobs ``python -m verl_roles.main -m`` would run with the same overrides
(:func:`verl_roles.sweep_grid.sweep_points`, Hydra's basic sweeper order, so point ``#n`` is job ``n``),
each composed exactly as the main job composes it (:func:`verl_roles.compose`). The sweep's own config
(Hydra's master config: the overrides without the sweeps) is composed too, since the multirun stops
before any job when it does not compose. Failing points are printed as a table, one line each;
the exit code is 2 when anything fails, 0 otherwise. The main job runs the same check first when
given ``--check-sweep``.
"""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from verl_roles.api import compose, compose_raw, composed_key_paths
from verl_roles.cmdline import CONFIG_FLAGS, HELP, MULTIRUN, NO_VALUE, CommandLine, FlagSpec
from verl_roles.commands.reporting import run_reporting_errors
from verl_roles.errors import ConfigError, Problem
from verl_roles.legacy import read_command_line
from verl_roles.notices import ConfigWarning
from verl_roles.sweep_grid import SweepPoint, master_overrides, sweep_points, swept_keys
from verl_roles.text_table import render_rows
from verl_roles.wording import LIBRARY_ERRORS, translate

USAGE = """usage: verl-roles check-sweep [--config-name NAME] [--config-dir DIR] [-m] [overrides...]

Check a sweep before launching it: compose and validate every point of the grid the overrides describe
(`a=1,2,3`, `range(...)`, `choice(...)`, as for `python -m verl_roles.main -m`), in one process,
writing nothing. Failing points are printed as a table (point number = the job number of the real
sweep, the swept values, the error on one line); exit code 2 when any point fails, 0 when all pass.
The sweep's own config (the overrides without the sweeps, which Hydra composes before any job) is
checked too. The main job does the same first with `--check-sweep`:
python -m verl_roles.main -m --check-sweep ...

example: verl-roles check-sweep model_engine=dp,megatron critic.optim.lr=1e-5,2e-5,-1"""

FLAGS: tuple[FlagSpec, ...] = (HELP, MULTIRUN, *CONFIG_FLAGS)

# The main job's own flag: run this check first, launch only when every point passes.
CHECK_SWEEP = FlagSpec(("--check-sweep",), NO_VALUE)


@dataclass(frozen=True)
class PointFailure:
    """A point that does not compose or validate: the point and its error."""

    point: SweepPoint
    error: ConfigError


@dataclass
class SweepCheck:
    """The outcome of checking a sweep: the swept keys, the points checked, what failed, and the
    warnings the points gave (each message once, with how many points gave it)."""

    keys: list[str]
    points: int
    failures: list[PointFailure] = field(default_factory=list)
    master_error: ConfigError | None = None
    warnings: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.failures and self.master_error is None

    def report(self) -> str:
        """The table of failing points and a last line counting them."""
        lines = []
        if self.master_error is not None:
            lines.append(
                "the sweep's own config (the overrides without the sweeps, composed before any job) does "
                f"not compose, so the sweep would stop before its first job: {self.master_error.headline()}"
            )
        if self.failures:
            header = ["#", *self.keys, "error"]
            rows = [
                [str(f.point.number), *(f.point.value_of(key) for key in self.keys), f.error.headline()]
                for f in self.failures
            ]
            lines.append(render_rows(header, rows))
        bad = len(self.failures)
        lines.append(
            f"check-sweep: {self.points} point{'s' if self.points != 1 else ''}: {self.points - bad} ok, "
            f"{bad} failed" + ("" if self.master_error is None else "; the sweep's own config fails")
        )
        return "\n".join(lines)


def check_sweep(command: CommandLine) -> SweepCheck:
    """Compose and validate every point of the sweep ``command`` describes; nothing is written."""
    command = read_command_line(command).command
    command.config_dir_path()  # a --config-dir that is no folder, or unreadable, stops the check at once
    config_name, config_dir = command.config_name, command.config_dir
    points = sweep_points(command)
    check = SweepCheck(keys=swept_keys(command), points=len(points))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConfigWarning)
        master = master_overrides(command)
        try:
            compose_raw(config_name, master, command.config_dir_path())
        except (ConfigError, *LIBRARY_ERRORS) as error:
            # Worded for the whole command line: the error knows which engine the sweep runs.
            check.master_error = translate(error, command, composed_key_paths)
        for point in points:
            try:
                compose(point.overrides, config_name, config_dir)
            except ConfigError as error:
                check.failures.append(PointFailure(point, error))
    check.warnings.update(str(w.message) for w in caught if issubclass(w.category, ConfigWarning))
    return check


def _print_warnings(check: SweepCheck) -> None:
    for message, count in check.warnings.items():
        times = "" if check.points <= 1 else f" ({count} of {check.points} points)"
        print(f"verl_roles warning: {message}{times}", file=sys.stderr)


def run_check(command: CommandLine) -> SweepCheck:
    """Check ``command``'s sweep and print the report (warnings on stderr, each once)."""
    check = check_sweep(command)
    _print_warnings(check)
    print(check.report())
    return check


def failed_check_error(check: SweepCheck) -> ConfigError:
    """The error a failed check ends the command with (exit code 2)."""
    first = check.failures[0].error if check.failures else check.master_error
    assert first is not None
    what = (
        f"{len(check.failures)} of {check.points} sweep points fail" if check.failures
        else "the sweep's own config fails"
    )
    return ConfigError([Problem(
        key="check-sweep",
        message=f"{what} (table above); nothing was launched or written",
        fix=f"fix the failing values and check again; the first error in full: {first.render()}",
    )])


def parse_args(args: Sequence[str]) -> CommandLine:
    command = CommandLine.parse(args, FLAGS)
    problems = command.usage_problems("check-sweep")
    if problems:
        raise ConfigError(problems)
    return command.without(MULTIRUN)


def run(args: list[str]) -> int:
    """The ``verl-roles check-sweep`` command."""
    args = list(args)
    if CommandLine.parse(args, FLAGS).flag(HELP) is not None:
        print(USAGE)
        return 0

    def action() -> None:
        check = run_check(parse_args(args))
        if not check.ok:
            raise failed_check_error(check)

    return run_reporting_errors(action, args)
