"""Plan a sweep before anything exists: every job composed, gated and validated, its folder and its
name decided (:mod:`verl_roles.runs.sweep_isolation`), and what stops the sweep found before its first job.
``verl-roles check-sweep`` is :func:`plan_sweep` without keeping the files; see :mod:`verl_roles.api.planning`
for a single run and for how a job renders its own files."""


from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from verl_roles.api.composition import (
    Served,
    compose_sweep_job,
    hydra_only,
    pin,
    split_hydra,
)
from verl_roles.api.planning import (
    JOB_NAME,
    SWEEP_MARKERS,
    JobSource,
    Rendered,
    checked,
    compose_command,
    job_name_problems,
    output_subdir_of,
    output_subdir_problems,
    render,
    render_job,
    run_folder_problems,
)
from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.notices import ConfigWarning
from verl_roles.compat import hydra as hydra_compat
from verl_roles.hydra_adapter.sources import freeze, thaw
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.sweep_grid import SweepPoint, refuse_hydra_setting_sweeps, sweep_points, swept_keys
from verl_roles.legacy import read_command_line
from verl_roles.omegaconf_adapter.yaml_dialect import dump
from verl_roles.runs import sweep_isolation
from verl_roles.runs.write_protocol import MARKER, write_atomic


@dataclass
class PlannedJob:
    """One job of a planned sweep: its point, its folder (relative to the sweep folder), its planned
    values, the pinned ``hydra`` node it is served, and (in the launching process only) what it writes."""

    point: SweepPoint
    subdir: str
    assigned: tuple[tuple[str, str], ...]
    hydra: bytes | DictConfig = field(repr=False)
    packed: bytes | None = field(default=None, repr=False)
    outputs: dict[str, object] = field(default_factory=dict)
    # Keys the user set that verl would not read in this job -> the setting that makes them inert.
    inert: dict[str, str] = field(default_factory=dict)
    # What planning this job said (its warnings and notices, each once), for its own job log.
    notes: tuple[str, ...] = ()

    @property
    def number(self) -> int:
        return self.point.number


@dataclass(frozen=True)
class PointFailure:
    """A sweep point that does not compose or validate: the point and its error."""

    point: SweepPoint
    error: ConfigError


@dataclass
class SweepPlan:
    """A sweep: every job composed and validated (or the failures), its folder, each job's folder and
    name, and what stops it before it starts (:attr:`problems`: shared folders or outputs)."""

    command: CommandLine
    keys: list[str]
    hydra_overrides: tuple[str, ...] = ()
    jobs: list[PlannedJob] = field(default_factory=list)
    failures: list[PointFailure] = field(default_factory=list)
    master_error: ConfigError | None = None
    problems: list[Problem] = field(default_factory=list)
    warnings: Counter[str] = field(default_factory=Counter)
    target: Path | None = None
    output_subdir: str | None = None
    master: DictConfig | None = field(default=None, repr=False)
    master_text: str = field(default="", repr=False)
    # The basic sweeper's own sweeps (hydra.sweeper.params of the config), legacy keys read.
    sweeper_params: dict[str, str] = field(default_factory=dict)
    # How many points the grid has (all of them, also when the sweep's own config fails first).
    points: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures and self.master_error is None and not self.problems

    def source(self, job: PlannedJob) -> JobSource:
        return JobSource(self.command.config_name, self.command.config_dir_path(),
                         (*self.hydra_overrides, *job.point.overrides), job.assigned)

    def served(self, staging: Path) -> Served:
        assert self.master is not None
        master = pin(self.master, {"hydra.sweep.dir": str(staging), "hydra.output_subdir": None,
                                   "hydra.sweeper.params": dict(self.sweeper_params) or None})
        jobs = {job.point.overrides: (job.number, _with_sweep_dir(job.hydra, staging)) for job in self.jobs}
        return Served(hydra=master, mode=RunMode.MULTIRUN, jobs=jobs)

    def job(self, number: int) -> PlannedJob:
        return next(job for job in self.jobs if job.number == number)

    def for_worker(self) -> SweepPlan:
        """This plan for a launcher's worker process: without what each job writes (it renders its own)."""
        return replace(self, jobs=[replace(job, packed=None) for job in self.jobs], master_text="")

    def write_multirun_file(self, staging: Path) -> None:
        """Hydra's ``multirun.yaml`` (the sweep's own config), written again: Hydra saved what it was
        served (the ``hydra`` node alone)."""
        path = staging / "multirun.yaml"
        if self.master_text and path.is_file():
            write_atomic(path, self.master_text)

    def rendered(self, job: PlannedJob) -> Rendered:
        """What ``job`` writes: the plan's copy in the launching process, else rendered again here."""
        if job.packed is not None:
            return Rendered.unpack(job.packed)
        return render_job(self.source(job), self.output_subdir)

    def error(self, label: str = "sweep") -> ConfigError:
        """The error a sweep that cannot run stops with (the table of failing points is printed first);
        ``label`` names what stopped (the main job's sweep, or check-sweep)."""
        if self.problems and not self.failures and self.master_error is None:
            return ConfigError(self.problems)
        # The sweep's own config failing stops it before any job: that is the error to read first.
        first = self.master_error if self.master_error is not None else self.failures[0].error
        what = ("the sweep's own config fails" if self.master_error is not None
                else f"{len(self.failures)} of {self.points} sweep points fail")
        return ConfigError([Problem(
            key=label,
            message=f"{what} (table above); nothing was launched or written",
            fix=f"fix the failing values and run again; the first error in full: {first.render()}",
        )])


def _with_sweep_dir(hydra: bytes | DictConfig, staging: Path) -> bytes | DictConfig:
    return pin(thaw(hydra), {"hydra.sweep.dir": str(staging)})


def plan_sweep(command: CommandLine, *, keep_files: bool = True) -> SweepPlan:
    """Compose, gate and validate every point of the sweep ``command`` describes (legacy keys already
    read), decide each job's folder and name, and check that no two jobs share a folder or an output
    path; nothing is written. ``keep_files`` keeps what each job writes (the main job does; check-sweep
    only checks). Warnings are gathered (each message once, with how many points gave it)."""
    refuse_hydra_setting_sweeps(command)
    plan = SweepPlan(command, swept_keys(command), tuple(o.text for o in command.overrides if o.is_hydra))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConfigWarning)
        try:
            master = compose_command(command, command.texts(), RunMode.MULTIRUN)
            plan.target = Path(os.path.abspath(str(OmegaConf.select(master, "hydra.sweep.dir"))))
            grid, plan.sweeper_params = _grid(command, master)
        except ConfigError as error:
            plan.master_error = error
            points = sweep_points(command)
            plan.points = len(points)
            _check_points_alone(plan, points)
            return plan
        plan.keys = swept_keys(grid)
        points = sweep_points(grid)
        plan.points = len(points)
        plan.output_subdir = output_subdir_of(master)
        plan.problems = _sweep_setting_problems(master, plan.output_subdir, points)
        if plan.problems:
            return plan
        plan.master = hydra_only(master)
        if keep_files:
            plan.master_text = dump(OmegaConf.to_container(master, resolve=False, enum_to_str=True))
        composed = _compose_points(plan, master, points, caught)
        names = sweep_isolation.assign_names([
            sweep_isolation.JobOutputs(job.point.number, job.point.swept,
                                       {sweep_isolation.EXPERIMENT_NAME: job.name})
            for job in composed
        ])
        for job in composed:
            _plan_job(plan, job, names.get(job.point.number), keep_files, caught)
    plan.warnings.update(str(w.message) for w in caught if issubclass(w.category, ConfigWarning))
    plan.failures.sort(key=lambda f: f.point.number)
    if not plan.failures:
        outputs = [sweep_isolation.JobOutputs(job.number, job.point.swept, job.outputs) for job in plan.jobs]
        plan.problems = (_folder_problems(plan) + sweep_isolation.shared_output_problems(outputs)
                         + _same_config_twice(plan.jobs))
    return plan


# The sweeper whose jobs verl_roles plans: Hydra's basic sweeper (a cartesian product of the overrides).
BASIC_SWEEPER = hydra_compat.BASIC_SWEEPER


def _grid(command: CommandLine, master: DictConfig) -> tuple[CommandLine, dict[str, str]]:
    """The command line the sweeper sweeps: the basic sweeper's ``hydra.sweeper.params`` of the config
    (legacy keys read, as on the command line) before the command line's own overrides, as the sweeper
    puts them; and those params as the sweeper is then handed them."""
    params = OmegaConf.select(master, "hydra.sweeper.params", default=None)
    if not params:
        return command, {}
    texts = [f"{key}={value}" for key, value in OmegaConf.to_container(params).items()]
    settings = [text for text in texts if text.lstrip("+~").startswith(("hydra.", "hydra/"))]
    if settings:
        # The sweeper hands each param to every job as its own override; Hydra's settings are the sweep's
        # (one folder, one launcher, one logging set-up), composed once before any job.
        raise ConfigError([Problem(
            key=f"hydra.sweeper.params.{text.partition('=')[0]}",
            message="sets one of Hydra's own settings as a value the sweeper hands each job; Hydra's "
            "settings belong to the sweep as a whole",
            fix="set it under `hydra:` of your config or as an override on the command line, and keep "
            "hydra.sweeper.params for the keys of the trainer config to sweep",
        ) for text in settings])
    read = read_command_line(CommandLine.of(texts, command.config_name, command.config_dir)).command
    translated = {o.text.partition("=")[0]: o.text.partition("=")[2] for o in read.overrides}
    grid = CommandLine.of([*read.texts(), *command.texts()], command.config_name, command.config_dir)
    return grid, translated


def _sweep_setting_problems(master: DictConfig, output_subdir: str | None,
                            points: list[SweepPoint]) -> list[Problem]:
    """What stops a sweep before any job whatever its jobs are: a sweeper whose jobs cannot be planned,
    a batch size the sweeper refuses, Hydra's record in a folder of its own outside the job, no job, one
    job listed twice."""
    target = Path(os.path.abspath(str(OmegaConf.select(master, "hydra.sweep.dir"))))
    problems = (run_folder_problems(target, "hydra.sweep.dir") + output_subdir_problems(output_subdir)
                + job_name_problems(master))
    sweeper = OmegaConf.select(master, "hydra.sweeper._target_", default=None)
    if sweeper != BASIC_SWEEPER:
        problems.append(Problem(
            key="hydra/sweeper",
            message=f"is {sweeper}, a sweeper that decides its jobs while it runs; verl_roles composes and "
            "validates every job before the sweep starts, which needs the basic sweeper's grid",
            fix="use the basic sweeper (the default: drop hydra/sweeper=...), with the values to try as "
            "comma lists or range(...)",
        ))
    size = OmegaConf.select(master, "hydra.sweeper.max_batch_size", default=None)
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
        problems.append(Problem(
            key="hydra.sweeper.max_batch_size", message="is how many jobs the sweeper launches at once",
            value=size, show_value=True, expected="null (all at once) or an integer >= 1",
            fix="set hydra.sweeper.max_batch_size=null or a positive number"))
    if not points and not problems:
        problems.append(Problem(
            key="sweep", message="has no job: a sweep in it lists no value (an empty range, say)",
            fix="give every swept key at least one value, e.g. range(1,4) rather than range(3,1)"))
    return problems + _twice(points)


def _twice(points: list[SweepPoint]) -> list[Problem]:
    """Jobs with the same overrides: one config trained twice under one name, from one checkpoint folder."""
    first: dict[tuple[str, ...], int] = {}
    for point in points:
        number = first.setdefault(point.overrides, point.number)
        if number != point.number:
            shown = " ".join(f"{key}={value}" for key, value in point.swept) or " ".join(point.overrides)
            return [Problem(
                key="sweep",
                message=f"lists job #{point.number} ({shown}) twice: it is job #{number} too; the two would "
                "train one config under one experiment name and checkpoint folder; nothing was launched or "
                "written",
                fix="list each value once; to train one config several times, sweep a seed (e.g. "
                "data.seed=1,2,3)",
            )]
    return []


def _same_config_twice(jobs: list[PlannedJob]) -> list[Problem]:
    """Jobs whose swept values differ only where verl would not read them: they train one config twice
    (``algorithm.kl_ctrl.kl_coef=0.001,0.01`` with the KL term off), under two names, for nothing."""
    first: dict[tuple[tuple[str, str], ...], PlannedJob] = {}
    for job in jobs:
        effective = tuple((key, "" if key in job.inert else value) for key, value in job.point.swept)
        earlier = first.setdefault(effective, job)
        if earlier is job:
            continue
        differ = [key for key, value in job.point.swept if value != earlier.point.value_of(key)]
        why = "; ".join(f"{key} under {job.inert[key]}" for key in differ if key in job.inert)
        shown = " ".join(f"{key}={value}" for key, value in job.point.swept)
        shown_first = " ".join(f"{key}={value}" for key, value in earlier.point.swept)
        return [Problem(
            key="sweep",
            message=f"jobs #{earlier.number} ({shown_first}) and #{job.number} ({shown}) would train the "
            f"same config: they differ only in {', '.join(differ)}, which verl would not read ({why}); "
            "nothing was launched or written",
            fix=f"drop the sweep over {', '.join(differ)}, or change the setting that makes verl read it "
            "(`verl-roles check-sweep` with the same overrides lists every job's warnings)",
        )]
    return []


def _check_points_alone(plan: SweepPlan, points: list[SweepPoint]) -> None:
    """When the sweep's own config fails (no job would run), each point checked as a run of its own, so
    the report says which points would fail too."""
    for point in points:
        source = JobSource(plan.command.config_name, plan.command.config_dir_path(),
                           (*plan.hydra_overrides, *point.overrides))
        try:
            render_job(source, None, files=False)
        except ConfigError as error:
            plan.failures.append(PointFailure(point, error))


@dataclass(frozen=True)
class _ComposedPoint:
    """A point composed as its job (once: Hydra's loader runs once per job of a sweep), kept frozen until
    every job's experiment name is known, with the name it would have."""

    point: SweepPoint
    frozen: bytes | DictConfig = field(repr=False)
    name: object
    # What composing it said.
    notes: tuple[str, ...] = ()


def _said(caught: list[warnings.WarningMessage], since: int) -> tuple[str, ...]:
    """Our warnings among those ``caught`` after the first ``since``, each once, in order."""
    ours = (str(w.message) for w in caught[since:] if issubclass(w.category, ConfigWarning))
    return tuple(dict.fromkeys(ours))


def _compose_points(plan: SweepPlan, master: DictConfig, points: list[SweepPoint],
                    caught: list[warnings.WarningMessage]) -> list[_ComposedPoint]:
    """Every point composed as its job, and the experiment name it would have; failures recorded. Each
    composition is kept frozen (pickled: compact, and a private copy when it is thawed) for
    :func:`_plan_job`, which needs every job's name before it decides its own."""
    composed: list[_ComposedPoint] = []
    for point in points:
        command = _job_command(plan, point)
        config_dir = command.config_dir_path()
        since = len(caught)
        try:
            root = checked(lambda p=point, d=config_dir: compose_sweep_job(master, p.overrides, d, JOB_NAME),
                           command)
            frozen = freeze(root)
            name = checked(lambda r=root: OmegaConf.select(r, sweep_isolation.EXPERIMENT_NAME, default=None),
                           command)
        except ConfigError as error:
            plan.failures.append(PointFailure(point, error))
            continue
        composed.append(_ComposedPoint(point, frozen, name, _said(caught, since)))
    return composed


def _job_command(plan: SweepPlan, point: SweepPoint) -> CommandLine:
    return CommandLine.of(list(point.overrides), plan.command.config_name, plan.command.config_dir)


def _plan_job(plan: SweepPlan, job: _ComposedPoint, name: str | None, keep: bool,
              caught: list[warnings.WarningMessage]) -> None:
    point = job.point
    since = len(caught)
    assigned = ((sweep_isolation.EXPERIMENT_NAME, name),) if name is not None else ()
    source = JobSource(plan.command.config_name, plan.command.config_dir_path(),
                       (*plan.hydra_overrides, *point.overrides), assigned)
    command = source.command()
    try:
        root = thaw(job.frozen)
        subdir = checked(lambda: _job_subdir(root, point.number), command)
        hydra = pin(hydra_only(root), {"hydra.sweep.subdir": subdir, "hydra.output_subdir": None})
        task, choices = split_hydra(root)
        rendered = checked(lambda: render(task, choices, source, plan.output_subdir, files=keep), command)
    except ConfigError as error:
        plan.failures.append(PointFailure(point, error))
        return
    notes = tuple(dict.fromkeys((*job.notes, *_said(caught, since))))
    plan.jobs.append(PlannedJob(point, subdir, assigned, hydra, rendered.pack() if keep else None,
                                rendered.outputs, dict(map(tuple, rendered.inert)), notes))


def _job_subdir(root: DictConfig, number: int) -> str:
    """The job's folder inside the sweep folder, as Hydra's launchers name it (``hydra.job.num`` and
    ``hydra.job.id`` are the job's number), resolved once."""
    with open_dict(root.hydra.job):
        root.hydra.job.num = number
        root.hydra.job.id = str(number)
    return str(OmegaConf.select(root, "hydra.sweep.subdir"))


# Names in a sweep's own folder that are not a job's: what Hydra, the main job, the write protocol and
# submitit put there.
RESERVED_NAMES = (*SWEEP_MARKERS, MARKER, ".submitit")


def _folder_problems(plan: SweepPlan) -> list[Problem]:
    """Two jobs in one folder, a job's folder inside another's, a job folder outside the sweep folder or
    named like a file of the sweep's own: the sweep is refused."""
    problems = []
    by_folder: dict[str, list[int]] = {}
    for job in plan.jobs:
        relative = os.path.normpath(job.subdir)
        first = relative.split(os.sep)[0]
        if os.path.isabs(job.subdir) or relative == "." or relative.startswith(".."):
            problems.append(Problem(
                key="hydra.sweep.subdir",
                message=f"puts job #{job.number} into {job.subdir!r}, which is not a folder inside the sweep "
                "folder (hydra.sweep.dir); nothing was launched or written",
                fix="name each job's folder relative to the sweep folder, e.g. the default "
                "hydra.sweep.subdir='${hydra.job.num}'",
            ))
            continue
        if first in RESERVED_NAMES or first.startswith(".verl_roles"):
            problems.append(Problem(
                key="hydra.sweep.subdir",
                message=f"puts job #{job.number} into {job.subdir!r}, a name the sweep's folder keeps for "
                f"its own files ({', '.join(RESERVED_NAMES)}); nothing was launched or written",
                fix="name the jobs' folders otherwise, e.g. the default "
                "hydra.sweep.subdir='${hydra.job.num}'",
            ))
            continue
        by_folder.setdefault(relative, []).append(job.number)
    for folder, numbers in by_folder.items():
        if len(numbers) > 1:
            shown = ", ".join(f"#{n}" for n in numbers[:6]) + (" ..." if len(numbers) > 6 else "")
            problems.append(Problem(
                key="hydra.sweep.subdir",
                message=f"gives {len(numbers)} jobs ({shown}) the same folder {folder!r}: each would "
                "overwrite the others' files; nothing was launched or written",
                fix="make the folder differ per job, e.g. the default hydra.sweep.subdir='${hydra.job.num}', "
                "or '${hydra.job.override_dirname}'",
            ))
    for folder, numbers in by_folder.items():
        outer = next((str(p) for p in Path(folder).parents if str(p) in by_folder), None)
        if outer is not None:
            problems.append(Problem(
                key="hydra.sweep.subdir",
                message=f"puts job #{numbers[0]} into {folder!r}, inside the folder of job "
                f"#{by_folder[outer][0]} ({outer!r}): one job's folder would hold another job's run; nothing "
                "was launched or written",
                fix="make the jobs' folders side by side, e.g. the default "
                "hydra.sweep.subdir='${hydra.job.num}' (a swept value holding `/` makes "
                "${hydra.job.override_dirname} a path)",
            ))
    return problems
