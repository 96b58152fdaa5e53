"""``verl-roles check-sweep [overrides...]``: every point of a sweep composed and validated in one process,
before anything is launched; nothing is written.

The check is the main job's own plan of the sweep (:func:`verl_roles.api.sweep_planning.plan_sweep`): the
points are the jobs ``python -m verl_roles.main -m`` would run with the same overrides (Hydra's basic sweeper
order, so point ``#n`` is job ``n``), each composed, gated and validated exactly as the main job does
it before it starts; the sweep's own config (Hydra's master config) is composed too; and where each job
would write (its folder, its experiment name, its checkpoints) is checked as the main job checks it.
Failing points are printed as a table, one line each; the exit code is 2 when anything fails, 0
otherwise. Every sweep of the main job runs the same plan first (``--check-sweep`` prints its report).
"""

from __future__ import annotations

import sys

from verl_roles.api.sweep_planning import SweepPlan, plan_sweep
from verl_roles.base.errors import counted
from verl_roles.base.text_table import render_rows
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import CONFIG_FLAGS, MULTIRUN
from verl_roles.legacy import read_command_line
from verl_roles.runs.sweep_isolation import EXPERIMENT_NAME
from verl_roles.shell.command import Command, Invocation


def check_sweep(command: CommandLine) -> SweepPlan:
    """The plan of the sweep ``command`` describes, without what the jobs would write."""
    command = read_command_line(command).command
    command.config_dir_path()  # a --config-dir that is no folder, or unreadable, stops the check at once
    return plan_sweep(command, keep_files=False)


def report(plan: SweepPlan) -> str:
    """The table of failing points, what else stops the sweep, and a last line counting the points."""
    lines = []
    if plan.master_error is not None:
        lines.append(
            "the sweep's own config (the overrides without the sweeps, composed before any job) does "
            f"not compose, so the sweep would stop before its first job: {plan.master_error.headline()}"
        )
    if plan.failures:
        header = ["#", *plan.keys, "error"]
        rows = [[str(f.point.number), *(f.point.value_of(key) for key in plan.keys), f.error.headline()]
                for f in plan.failures]
        lines.append(render_rows(header, rows))
    lines += [f"{problem.key}: {problem.message}" for problem in plan.problems]
    renamed = [job for job in plan.jobs if job.assigned]
    if renamed and plan.ok:
        example = dict(renamed[0].assigned)[EXPERIMENT_NAME]
        lines.append(
            f"check-sweep: {len(renamed)} jobs would share one {EXPERIMENT_NAME}, so each gets its own (its "
            f"swept values appended, e.g. job #{renamed[0].number}: {example}); sweep_summary.csv lists them"
        )
    bad = len(plan.failures)
    points = plan.points
    lines.append(
        f"check-sweep: {counted(points, 'point')}: {points - bad} ok, {bad} failed"
        + ("" if plan.master_error is None else "; the sweep's own config fails")
        + (f"; {counted(len(plan.problems), 'problem')} with where the jobs "
           "write" if plan.problems else "")
    )
    return "\n".join(lines)


def print_warnings(plan: SweepPlan) -> None:
    """Each warning the points gave, once, with how many points gave it."""
    for message, count in plan.warnings.items():
        times = "" if plan.points <= 1 else f" ({count} of {plan.points} points)"
        print(f"verl_roles warning: {message}{times}", file=sys.stderr)


def print_plan_report(plan: SweepPlan) -> None:
    print_warnings(plan)
    print(report(plan))


def _check(invocation: Invocation) -> None:
    plan = check_sweep(invocation.line.without(MULTIRUN))
    print_plan_report(plan)
    if not plan.ok:
        raise plan.error("check-sweep")


COMMAND = Command(
    name="check-sweep",
    summary="compose and validate every point of a sweep before launching it",
    action=_check,
    flags=(MULTIRUN, *CONFIG_FLAGS),
    about="""\
Check a sweep before launching it: compose and validate every point of the grid the overrides describe
(`a=1,2,3`, `range(...)`, `choice(...)`, `glob(...)`, as for `python -m verl_roles.main -m`), in one
process, writing nothing. Failing points are printed as a table (point number = the job number of the
real sweep, the swept values, the error on one line); exit code 2 when any point fails, 0 when all pass.
The sweep's own config (the overrides without the sweeps, which Hydra composes before any job) is
checked too, and so is where each job writes: its folder, its experiment name and its checkpoint folder
must be its own. The main job runs the same check before every sweep.""",
    examples=("verl-roles check-sweep model_engine=dp,megatron critic.optim.lr=1e-5,2e-5,-1",),
)
