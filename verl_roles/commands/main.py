"""The main job: ``python -m verl_roles.main [hydra overrides]``.

A Hydra app (``--cfg job``, ``--resolve``, ``--info defaults``, ``--config-dir`` and ``-m`` behave as in
any Hydra app), run in three steps:

1. **plan** (:mod:`verl_roles.api.planning`): compose, gate and validate the run, or every job of a sweep,
   and decide every folder, before anything exists. A refused run or sweep creates nothing.
2. **claim** (:mod:`verl_roles.runs.write_protocol`): lock the run's (the sweep's) folder and make a staging
   folder beside it; a folder holding another run is refused unless ``--overwrite`` is given.
3. **run**: Hydra's own run loop on what was planned (:func:`verl_roles.api.composition.run_app`, served the
plan's
   compositions): its logging, its launcher and sweeper, each job's folder inside the staging folder,
   where each job writes ``resolved.yaml``, ``roles/<role>.yaml`` and ``.hydra/``; then the staging
   folder is swapped into place (with ``sweep_summary.csv`` for a sweep). Ctrl-C or SIGTERM on the
   way leaves nothing.

Hydra's views (``--cfg``, ``--info``, ``--help``, shell completion) compose as Hydra does, through the
same gated loader, and write nothing.
"""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from verl_roles.api.composition import run_app, served_job
from verl_roles.api.planning import Rendered, RunPlan, compose_run, is_sweep, multirun_by_config, plan_run
from verl_roles.api.sweep_planning import SweepPlan, plan_sweep
from verl_roles.base.errors import ConfigError, Problem, counted
from verl_roles.base.installation import print_shadowing_notice
from verl_roles.base.layout import ROLE_SECTIONS
from verl_roles.commands import sweep
from verl_roles.commands.check_sweep import print_warnings, report
from verl_roles.commands.main_help import main_help
from verl_roles.commands.show import composition_note, shows_composition
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.config_tree import CONF_DIR
from verl_roles.inputs.flags import (
    CFG,
    EXPERIMENTAL_RERUN,
    HELP,
    HYDRA_FLAGS,
    HYDRA_HELP,
    INFO,
    NO_VALUE,
    SHELL_COMPLETION,
    VERSION,
    FlagSpec,
)
from verl_roles.legacy import config_path_move, read_command_line
from verl_roles.omegaconf_adapter.yaml_dialect import dump
from verl_roles.runs.run_files import RESOLVED
from verl_roles.runs.write_protocol import (
    MARKER,
    RUN,
    SWEEP,
    claim_folder,
    signals_raise,
    write_all_or_nothing,
)
from verl_roles.shell.command import version_text
from verl_roles.shell.reporting import recorded_warnings, run_reporting_errors, say
from verl_roles.validation import placeholders

# The main job's own flags, besides Hydra's.
CHECK_SWEEP = FlagSpec(("--check-sweep",), NO_VALUE, help="with -m: check every point of the grid first")
OVERWRITE = FlagSpec(("--overwrite",), NO_VALUE, help="replace the run folder of an earlier run")
MAIN_FLAGS: tuple[FlagSpec, ...] = (*HYDRA_FLAGS, CHECK_SWEEP, OVERWRITE)

# Hydra's flags that show something instead of running the job.
VIEWS = (HELP, HYDRA_HELP, CFG, INFO, SHELL_COMPLETION)


@dataclass
class MainJob:
    """The task function Hydra calls for every job: it writes what the plan rendered for that job into
    the job's folder (Hydra's output folder: inside the staging folder) and prints its summary.

    A sweep job records its outcome in its folder (:mod:`verl_roles.commands.sweep`); a single run's
    error propagates. In a launcher's worker process the plan has no rendered files, and the job renders
    its own, exactly as the plan does.
    """

    run: RunPlan | None = None
    sweep_plan: SweepPlan | None = None
    # The run directories this process's planned runs were committed to (`verl-roles launch` trains on
    # them).
    run_dirs: list[Path] = field(default_factory=list)
    written: str = ""
    # What the planned run said (its warnings and notices), for its own job log (main.log).
    notes: tuple[str, ...] = ()
    # The process that planned the sweep: a worker it started ends when it ends (end_with_launcher).
    launcher: tuple[str, int, str | None] = field(default_factory=sweep.this_process)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        if self.sweep_plan is not None:
            state["sweep_plan"] = self.sweep_plan.for_worker()
        return state

    def __call__(self, cfg: DictConfig) -> dict[str, str]:
        job = served_job(cfg)
        hydra_cfg = HydraConfig.get()
        out_dir = Path(str(hydra_cfg.runtime.output_dir))
        if job == "run" and self.run is not None:
            run = self.run
            try:
                # Said by the caller once the run is swapped into place (a run stopped before that
                # wrote nothing).
                self.written = write_job(
                    out_dir, run.target, run.rendered, run.output_subdir, hydra_cfg, None)
            except ConfigError as error:
                raise named_finally(error, out_dir, self.run.target) from None
            keep_in_job_log(out_dir, run.rendered.summary, self.notes)
            return sweep.ok()
        if job is None or self.sweep_plan is None:
            raise ConfigError([Problem(key="main job", message="was run without a plan")])
        sweep.end_with_launcher(self.launcher)
        plan = self.sweep_plan
        planned = plan.job(int(job))
        final = sweep.job_folder(plan, planned)
        try:
            rendered = plan.rendered(planned)
            marker = sweep.job_marker(sweep.ok())
            say(write_job(out_dir, final, rendered, plan.output_subdir, hydra_cfg, marker))
            keep_in_job_log(out_dir, rendered.summary, planned.notes)
        except ConfigError as staged_error:
            error = named_finally(staged_error, out_dir, final)
            outcome = sweep.failed(error.headline())
            write_all_or_nothing([
                (out_dir / sweep.ERROR_FILE, error.render().rstrip("\n") + "\n"),
                (out_dir / MARKER, sweep.job_marker(outcome)),
            ])
            say(f"verl_roles error: job #{job}: {error.render()}", file=sys.stderr)
            return outcome
        return sweep.ok()


def keep_in_job_log(out_dir: Path, summary: str, notes: Sequence[str]) -> None:
    """What a job said, kept in its own folder: its summary and every warning and notice, as records of
    Hydra's job log (``main.log``, when Hydra's job logging writes one), never again on the terminal."""
    files = [handler for handler in logging.getLogger().handlers
             if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == out_dir]
    log = logging.getLogger("verl_roles")
    records = [log.makeRecord(log.name, logging.INFO, __file__, 0, summary, None, None)]
    records += [log.makeRecord(log.name, logging.WARNING, __file__, 0, note, None, None) for note in notes]
    for handler in files:
        for record in records:
            handler.handle(record)


def named_finally(error: ConfigError, staged: Path, final: Path) -> ConfigError:
    """``error`` naming the folder a job will have once in place instead of its staging folder."""
    def fix(text: str) -> str:
        return text.replace(str(staged), str(final))

    return ConfigError([replace(p, key=fix(p.key), message=fix(p.message), fix=fix(p.fix))
                        for p in error.problems])


def write_job(
    out_dir: Path, final: Path, rendered: Rendered, output_subdir: str | None, hydra_cfg: DictConfig,
    marker: str | None,
) -> str:
    """A job's files into ``out_dir`` (``resolved.yaml`` last), Hydra's ``.hydra/`` files naming the
    folder the job will have once the run is in place (``final``); prints the job's summary and returns
    the line saying what was written (said once the files are in place)."""
    files = dict(rendered.files)
    if output_subdir is not None:
        files.update(_hydra_files(hydra_cfg, out_dir, final, output_subdir))
    ordered = sorted(files.items(), key=lambda item: item[0] == RESOLVED)
    extra = [(out_dir / MARKER, marker)] if marker is not None else []
    write_all_or_nothing([(out_dir / name, text) for name, text in ordered] + extra)
    say(rendered.summary)
    roles = ", ".join(f"roles/{name}.yaml" for name in ROLE_SECTIONS)
    return f"verl_roles: wrote resolved.yaml, {roles} to {_display(final)}"


def _hydra_files(hydra_cfg: DictConfig, staged: Path, final: Path, output_subdir: str) -> dict[str, str]:
    """``hydra.yaml`` and ``overrides.yaml`` as Hydra writes them (``OmegaConf.to_yaml``'s text, through
    the one dumper), with the job's final folder (and the user's ``hydra.output_subdir``) instead of the
    staging folder the job ran in."""
    hydra = OmegaConf.to_container(hydra_cfg, resolve=False, enum_to_str=True)
    hydra["output_subdir"] = output_subdir
    hydra["runtime"]["output_dir"] = str(final)
    for section, folder in (("run", final), ("sweep", final.parent)):
        value = OmegaConf.select(hydra_cfg, f"{section}.dir")
        if isinstance(value, str) and value.startswith(str(staged.parent)):
            hydra[section]["dir"] = str(folder)
    return {
        f"{output_subdir}/hydra.yaml": dump({"hydra": hydra}),
        f"{output_subdir}/overrides.yaml": dump(
            OmegaConf.to_container(hydra_cfg.overrides.task, resolve=False, enum_to_str=True)),
    }


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _refuse_config_path(command: CommandLine) -> None:
    """``--config-path DIR`` replaces the config tree, read relative to the package; verl's launch scripts
    pass their own folder that way (``--config-path=config``). Here the folder goes next to ours, or, when
    it is verl's own, is not needed: the fix is what ``verl-roles migrate`` writes
    (:func:`verl_roles.legacy.config_path_move`)."""
    move = config_path_move(command)
    if move is None:
        return
    flag = move.flag
    assert flag.value is not None
    if Path(flag.value).is_absolute() and Path(flag.value).resolve() == CONF_DIR:
        return
    folder = Path(flag.value).expanduser()
    if folder.is_absolute():
        read_as = "a folder without ppo_trainer and the groups it needs"
        missing = f" (there is no folder {flag.value!r} either)"
    else:
        read_as = "a folder that Hydra reads relative to the verl_roles package, where there is none"
        missing = f" (there is no folder {flag.value!r} in {Path.cwd()} either)"
    if move.dropped:
        fix = f"drop `{' '.join(flag.tokens)}`: {move.why}"
    else:
        fix = (f"write `{' '.join(move.tokens).replace('=', ' ', 1)}` instead: {move.why}"
               + ("" if folder.is_dir() else missing))
    raise ConfigError([Problem(
        key=f"{flag.typed_name} {flag.value}",
        message=(
            f"replaces verl_roles' own config tree with {read_as} (verl's launch scripts pass their own "
            "config folder this way)"
        ),
        fix=fix + "; `verl-roles migrate` rewrites the whole command line",
    )])


def main(argv: list[str] | None = None) -> int:
    """Run the main job on ``argv`` (default: the process arguments); return the exit code.

    What importing left behind (modules, classes, Hydra's and OmegaConf's tables) lives as long as the
    process: ``gc.freeze`` takes it out of the cyclic collector's view, which then walks only the run's
    own objects (about 3% of a cold run's instructions; garbage is still collected as before)."""
    gc.freeze()
    return run_main_job(list(sys.argv[1:] if argv is None else argv))[0]


# Called with a single run's staging folder (its files written) and the folder it will have, before the
# run is swapped into place; raising refuses the run and leaves nothing behind.
BeforeCommit = Callable[[Path, Path], None]


def run_main_job(
    args: list[str], *, single_run_only: bool = False, before_commit: BeforeCommit | None = None
) -> tuple[int, list[Path]]:
    """The main job on ``args``: its exit code and the run directories it wrote. ``single_run_only``
    refuses a sweep before anything is planned and a path still at its placeholder (``verl-roles launch``
    trains one run, on the user's model and data); ``before_commit`` checks a single run's files before
    they are put in place (``verl-roles launch`` runs verl's checks)."""
    args, job = list(args), MainJob()
    print_shadowing_notice()
    return (run_reporting_errors(lambda: _invoke(args, job, single_run_only, before_commit), args),
            job.run_dirs)


def _invoke(args: list[str], job: MainJob, single_run_only: bool, before_commit: BeforeCommit | None) -> None:
    # Legacy keys must be rewritten before Hydra sees them (it rejects unknown keys while composing),
    # for every job of a sweep alike.
    command = read_command_line(CommandLine.parse(args, MAIN_FLAGS)).command
    if command.flag(HELP) is None:
        # An option Hydra's parser does not know (`--config_dir`, `--Overwrite`): one paragraph with the
        # option meant, before anything else reads the line.
        problems = command.flag_problems("the main job", "python -m verl_roles.main")
        if problems:
            raise ConfigError(problems)
    if command.flag(VERSION) is not None:
        say(version_text())
        return
    command.config_dir_path()  # a --config-dir that is not a folder is refused before Hydra starts
    if command.flag(HELP) is not None:
        print(main_help(command))
        return
    _refuse_config_path(command)
    if command.flag(EXPERIMENTAL_RERUN) is not None:
        raise ConfigError([Problem(
            key="--experimental-rerun",
            message="is not supported: Hydra's rerun unpickles a file of a previous run, and the main job "
            "never reads pickled files",
            fix="run the main job again with that run's overrides (its .hydra/overrides.yaml lists them)",
        )])
    overwrite = command.flag(OVERWRITE) is not None
    report_check = command.flag(CHECK_SWEEP) is not None
    command = command.without(OVERWRITE).without(CHECK_SWEEP)
    if any(command.flag(flag) is not None for flag in VIEWS):
        run_app(job, command.hydra_argv())
        if shows_composition(command):
            print(composition_note(command), file=sys.stderr)
            if not (command.is_multirun or command.sweeps):
                # Hydra showed the composition; a run with it would still be refused: say so (exit 2).
                plan_run(command, compose_run(command))
        return
    if command.is_multirun or (command.sweeps and multirun_by_config(command)):
        _refuse_sweep(single_run_only)
        _run_sweep(command, job, overwrite, report_check)
        return
    with recorded_warnings() as said:
        root = compose_run(command)
        if not is_sweep(command, root):
            plan = _plan_single(command, root, report_check)
    if is_sweep(command, root):
        _refuse_sweep(single_run_only)
        _run_sweep(command, job, overwrite, report_check)
        return
    job.notes = tuple(said)
    if single_run_only and plan.rendered.unset:
        raise ConfigError(placeholders.launch_problems(plan.rendered.unset))
    with signals_raise(), claim_folder(plan.target, RUN, overwrite=overwrite) as claim:
        job.run = plan
        run_app(job, command.hydra_argv(), plan.served(claim.staging))
        if before_commit is not None:
            before_commit(claim.staging, plan.target)
        claim.commit()
    if job.written:
        say(job.written)
    job.run_dirs.append(plan.target)


def _plan_single(command: CommandLine, root: DictConfig, report_check: bool) -> RunPlan:
    if report_check:
        raise ConfigError([Problem(
            key=CHECK_SWEEP.name,
            message="checks the points of a sweep, but this is a single run (no -m)",
            fix="add -m to run a sweep, or drop --check-sweep (a single run is checked before it writes)",
        )])
    return plan_run(command, root)


def _refuse_sweep(single_run_only: bool) -> None:
    if single_run_only:
        raise ConfigError([Problem(
            key="-m",
            message="`verl-roles launch` starts one training run, and this is a sweep",
            fix="compose the sweep with `python -m verl_roles.main -m ...`, then train each job with "
            "`verl-roles launch --run-dir JOB_DIR` (README: Train with verl)",
        )])


def _run_sweep(command: CommandLine, job: MainJob, overwrite: bool, report_check: bool) -> None:
    plan = plan_sweep(command)
    print_warnings(plan)
    if report_check or not plan.ok:
        print(report(plan))
    if not plan.ok:
        raise plan.error()
    assert plan.target is not None
    with signals_raise(), claim_folder(plan.target, SWEEP, overwrite=overwrite) as claim:
        job.sweep_plan = plan
        run_app(job, command.hydra_argv(), plan.served(claim.staging))
        try:
            plan.write_multirun_file(claim.staging)
            summary = sweep.write_summary(plan, claim.staging)
        except ConfigError as error:
            raise named_finally(error, claim.staging, plan.target) from None
        claim.commit()
    total, bad = len(summary.records), len(summary.failures)
    jobs = counted(total, "job")
    say(f"verl_roles: sweep of {jobs}: {total - bad} ok, {bad} failed; summary in {summary.path}")
    if summary.failures:
        raise ConfigError([Problem(key="sweep", message=sweep.sweep_error_text(summary))])
