"""Plan a run before anything exists: compose, gate and validate it (every job of a sweep), decide where
each file goes and what each sweep job is called; Hydra then runs what was planned.

:func:`plan_run` and :func:`plan_sweep` run in the launching process, once per run and once per sweep
job, before Hydra makes any folder, so a refused run or sweep creates nothing. A plan holds what each
job writes (rendered; compressed for a sweep) and the ``hydra`` node Hydra is served
(:mod:`verl_roles.hydra_adapter.serving`). A job that runs in another process (a joblib worker, a SLURM
job) gets the plan without the rendered files and renders its own exactly as the plan did
(:func:`render_job`). ``verl-roles check-sweep`` is :func:`plan_sweep` without keeping the files.
"""

from __future__ import annotations

import json
import os
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from verl_roles import gate, sweep_isolation
from verl_roles.api import (
    Served,
    compose_full,
    compose_sweep_job,
    composed_key_paths,
    hydra_only,
    pin,
    split_hydra,
    step_inputs,
)
from verl_roles.cmdline import CommandLine
from verl_roles.errors import ConfigError, Problem
from verl_roles.layout import ENGINE_KEY
from verl_roles.legacy import read_command_line
from verl_roles.limits import read_config_file
from verl_roles.notices import ConfigWarning
from verl_roles.omegaconf_adapter.yaml_dialect import dump, load_plain
from verl_roles.pipeline import finalize
from verl_roles.releases import release_of
from verl_roles.rules import RULES, validate
from verl_roles.run_files import RESOLVED, run_files
from verl_roles.summary import summarize
from verl_roles.sweep_grid import SweepPoint, sweep_points, swept_keys
from verl_roles.wording import LIBRARY_ERRORS, translate
from verl_roles.write_protocol import MARKER, write_atomic

# The header of .hydra/config.yaml: Hydra's composition, not the config the run uses.
HYDRA_COPY_NOTE = (
    "# Hydra's composition of this run, before verl_roles read legacy keys, applied the role options and\n"
    "# the megatron_config_path slime file, and resolved the config. The config this run uses is\n"
    "# {resolved} (`verl-roles show` with the run's overrides prints the same).\n"
)
# The name Hydra's run loop gives the main job (after its module, verl_roles/commands/main.py): the
# composition made before the loop starts gives it the same.
JOB_NAME = "main"


# --- one job ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSource:
    """What a job is composed from: the config name, the absolute ``--config-dir``, every override it is
    composed with (a sweep job: the sweep's Hydra overrides, then the sweeper's for the job), and the
    values planned for it (its experiment name)."""

    config_name: str
    config_dir: str | None
    overrides: tuple[str, ...]
    assigned: tuple[tuple[str, str], ...] = ()

    def command(self) -> CommandLine:
        return CommandLine.of(list(self.overrides), self.config_name, self.config_dir)


@dataclass(frozen=True)
class Rendered:
    """A job's files (relative name -> text; ``.hydra/config.yaml`` among them unless Hydra's output
    folder is off), the summary it prints, and the resolved values that decide where it writes."""

    files: dict[str, str]
    summary: str
    outputs: dict[str, object]

    def pack(self) -> bytes:
        return zlib.compress(json.dumps([self.files, self.summary, self.outputs]).encode("utf-8"), 3)

    @staticmethod
    def unpack(data: bytes) -> Rendered:
        files, summary, outputs = json.loads(zlib.decompress(data).decode("utf-8"))
        return Rendered(files, summary, outputs)


def _finalize(task: DictConfig, choices: dict[str, str | None], source: JobSource) -> DictConfig:
    """The steps, the gate and the rules on a composed task config (in place), with the planned values."""
    if source.assigned:
        with open_dict(task):
            for key, value in source.assigned:
                OmegaConf.update(task, key, value, merge=False)
    command = read_command_line(source.command()).command
    return finalize(task, step_inputs(command, choices))


def _render(task: DictConfig, choices: dict[str, str | None], source: JobSource,
            output_subdir: str | None) -> Rendered:
    before = _hydra_copy(task, output_subdir)
    resolved = _finalize(task, choices, source)
    files = run_files(resolved)
    if before is not None:
        files = {**files, f"{output_subdir}/config.yaml": before}
    outputs = {key: OmegaConf.select(resolved, key, default=None) for key in sweep_isolation.READ_KEYS}
    return Rendered(files, summarize(resolved), {k: _plain(v) for k, v in outputs.items()})


def _plain(value: object) -> object:
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def _hydra_copy(task: DictConfig, output_subdir: str | None) -> str | None:
    """The text of ``.hydra/config.yaml`` for ``task`` (Hydra's composition), None when it is off."""
    if output_subdir is None:
        return None
    resolved = os.path.relpath("resolved.yaml", output_subdir)
    return HYDRA_COPY_NOTE.format(resolved=resolved) + dump(OmegaConf.to_container(task, resolve=False))


def render_job(source: JobSource, output_subdir: str | None) -> Rendered:
    """Compose and render one job from scratch: what a job in another process does."""
    command = read_command_line(source.command()).command
    root = _compose(command, command.texts())
    task, choices = split_hydra(root)
    return _checked(lambda: _render(task, choices, source, output_subdir), command)


def _compose(command: CommandLine, overrides: list[str], run_mode: RunMode = RunMode.RUN) -> DictConfig:
    return _checked(lambda: compose_full(command.config_name, overrides, command.config_dir_path(),
                                                  run_mode, JOB_NAME),
                    command)


def _checked(action, command: CommandLine):  # noqa: ANN001, ANN202 - a thunk and what it returns
    """``action()``, a library error worded for ``command``."""
    try:
        return action()
    except (ConfigError, *LIBRARY_ERRORS) as error:
        raise translate(error, command, composed_key_paths) from error


# --- a single run -----------------------------------------------------------------------------------


@dataclass
class RunPlan:
    """A single run, composed and validated: where it goes, what it writes, what Hydra is served."""

    target: Path
    output_subdir: str | None
    rendered: Rendered
    hydra: DictConfig = field(repr=False)

    def served(self, staging: Path) -> Served:
        return Served(hydra=pin(self.hydra, {"hydra.run.dir": str(staging), "hydra.output_subdir": None}),
                      mode=RunMode.RUN)


def is_sweep(command: CommandLine, root: DictConfig) -> bool:
    """``-m``, or a config that sets ``hydra.mode: MULTIRUN`` itself."""
    return command.is_multirun or OmegaConf.select(root, "hydra.mode") == RunMode.MULTIRUN


def multirun_by_config(command: CommandLine) -> bool:
    """A command line that sweeps without ``-m`` is a multirun when its config sets ``hydra.mode:
    MULTIRUN`` (Hydra composes it in that mode to find out); otherwise it is refused as Hydra refuses it."""
    root = _compose(command, command.texts(), RunMode.MULTIRUN)
    if OmegaConf.select(root, "hydra.mode") == RunMode.MULTIRUN:
        return True
    swept = next(o for o in command.overrides if o.is_sweep)
    raise ConfigError([Problem(
        key=f"`{swept.text}`",
        message="sweeps over several values, but this is a single run (no -m)",
        fix=f"add -m to run one job per value (python -m verl_roles.main -m {swept.text} ...), or give the "
        "key one value",
    )])


def compose_run(command: CommandLine) -> DictConfig:
    """The full composition of a single run (its ``hydra`` node included), gated."""
    return _compose(command, command.texts())


def plan_run(command: CommandLine, root: DictConfig) -> RunPlan:
    """Validate the single run ``command`` composed as ``root`` (from :func:`compose_run`) and render
    what it writes; nothing is written. Raises the :class:`ConfigError` the run would stop with."""
    target = Path(os.path.abspath(str(_checked(lambda: OmegaConf.select(root, "hydra.run.dir"), command))))
    output_subdir = _output_subdir(root)
    problems = output_subdir_problems(output_subdir)
    if problems:
        raise ConfigError(problems)
    hydra = hydra_only(root)
    task, choices = split_hydra(root)
    source = JobSource(command.config_name, command.config_dir_path(), tuple(command.texts()))
    rendered = _checked(lambda: _render(task, choices, source, output_subdir), command)
    return RunPlan(target, output_subdir, rendered, hydra)


def _output_subdir(root: DictConfig) -> str | None:
    value = OmegaConf.select(root, "hydra.output_subdir")
    return None if value is None else str(value)


# --- a sweep ----------------------------------------------------------------------------------------


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
    from verl_roles.hydra_adapter.sources import thaw

    return pin(thaw(hydra), {"hydra.sweep.dir": str(staging)})


def plan_sweep(command: CommandLine, *, keep_files: bool = True) -> SweepPlan:
    """Compose, gate and validate every point of the sweep ``command`` describes (legacy keys already
    read), decide each job's folder and name, and check that no two jobs share a folder or an output
    path; nothing is written. ``keep_files`` keeps what each job writes (the main job does; check-sweep
    only checks). Warnings are gathered (each message once, with how many points gave it)."""
    plan = SweepPlan(command, swept_keys(command), tuple(o.text for o in command.overrides if o.is_hydra))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConfigWarning)
        try:
            master = _compose(command, command.texts(), RunMode.MULTIRUN)
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
        plan.output_subdir = _output_subdir(master)
        plan.problems = _sweep_setting_problems(master, plan.output_subdir, len(points))
        if plan.problems:
            return plan
        plan.master = hydra_only(master)
        if keep_files:
            plan.master_text = dump(OmegaConf.to_container(master, resolve=False, enum_to_str=True))
        named = _names(plan, master, points)
        names = sweep_isolation.assign_names([
            sweep_isolation.JobOutputs(point.number, point.swept, {sweep_isolation.EXPERIMENT_NAME: name})
            for point, name in named
        ])
        for point, _ in named:
            _plan_job(plan, master, point, names.get(point.number), keep_files)
    plan.warnings.update(str(w.message) for w in caught if issubclass(w.category, ConfigWarning))
    plan.failures.sort(key=lambda f: f.point.number)
    if not plan.failures:
        outputs = [sweep_isolation.JobOutputs(job.number, job.point.swept, job.outputs) for job in plan.jobs]
        plan.problems = _folder_problems(plan) + sweep_isolation.shared_output_problems(outputs)
    return plan


# The sweeper whose jobs verl_roles plans: Hydra's basic sweeper (a cartesian product of the overrides).
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def _grid(command: CommandLine, master: DictConfig) -> tuple[CommandLine, dict[str, str]]:
    """The command line the sweeper sweeps: the basic sweeper's ``hydra.sweeper.params`` of the config
    (legacy keys read, as on the command line) before the command line's own overrides, as the sweeper
    puts them; and those params as the sweeper is then handed them."""
    params = OmegaConf.select(master, "hydra.sweeper.params", default=None)
    if not params:
        return command, {}
    texts = [f"{key}={value}" for key, value in OmegaConf.to_container(params).items()]
    read = read_command_line(CommandLine.of(texts, command.config_name, command.config_dir)).command
    translated = {o.text.partition("=")[0]: o.text.partition("=")[2] for o in read.overrides}
    grid = CommandLine.of([*read.texts(), *command.texts()], command.config_name, command.config_dir)
    return grid, translated


def _sweep_setting_problems(master: DictConfig, output_subdir: str | None, points: int) -> list[Problem]:
    """What stops a sweep before any job whatever its jobs are: a sweeper whose jobs cannot be planned,
    a batch size the sweeper refuses, Hydra's record in a folder of its own outside the job, no job."""
    problems = output_subdir_problems(output_subdir)
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
    if points == 0 and not problems:
        problems.append(Problem(
            key="sweep", message="has no job: a sweep in it lists no value (an empty range, say)",
            fix="give every swept key at least one value, e.g. range(1,4) rather than range(3,1)"))
    return problems


def output_subdir_problems(output_subdir: str | None) -> list[Problem]:
    """``hydra.output_subdir``, where Hydra's record of a run goes, must be a folder inside the run's folder
    that holds nothing else of the run."""
    if output_subdir is None:
        return []
    normal = os.path.normpath(output_subdir)
    first = normal.split(os.sep)[0]
    if not os.path.isabs(output_subdir) and normal != "." and not normal.startswith("..") and first not in (
        "roles", "resolved.yaml", MARKER
    ) and not first.startswith(".verl_roles"):
        return []
    return [Problem(
        key="hydra.output_subdir",
        message=f"puts Hydra's record of the run ({output_subdir!r}) outside the run's folder or into a part "
        "of it that holds the run's own files (roles/, resolved.yaml)",
        fix="leave it at .hydra (the default), name another folder inside the run's folder, or set it to "
        "null for no record",
    )]


def _check_points_alone(plan: SweepPlan, points: list[SweepPoint]) -> None:
    """When the sweep's own config fails (no job would run), each point checked as a run of its own, so
    the report says which points would fail too."""
    for point in points:
        source = JobSource(plan.command.config_name, plan.command.config_dir_path(),
                           (*plan.hydra_overrides, *point.overrides))
        try:
            render_job(source, None)
        except ConfigError as error:
            plan.failures.append(PointFailure(point, error))


def _names(plan: SweepPlan, master: DictConfig, points: list[SweepPoint]) -> list[tuple[SweepPoint, object]]:
    """Every point composed as its job, and the experiment name it would have; failures recorded.

    The compositions are not kept (a big sweep would hold them all at once): :func:`_plan_job` composes
    each again, from the composition memo."""
    named: list[tuple[SweepPoint, object]] = []
    for point in points:
        command = _job_command(plan, point)
        config_dir = command.config_dir_path()
        try:
            root = _checked(lambda p=point, d=config_dir: compose_sweep_job(master, p.overrides, d, JOB_NAME),
                            command)
            name = _checked(lambda r=root: OmegaConf.select(r, sweep_isolation.EXPERIMENT_NAME, default=None),
                            command)
        except ConfigError as error:
            plan.failures.append(PointFailure(point, error))
            continue
        named.append((point, name))
    return named


def _job_command(plan: SweepPlan, point: SweepPoint) -> CommandLine:
    return CommandLine.of(list(point.overrides), plan.command.config_name, plan.command.config_dir)


def _plan_job(plan: SweepPlan, master: DictConfig, point: SweepPoint, name: str | None, keep: bool) -> None:
    assigned = ((sweep_isolation.EXPERIMENT_NAME, name),) if name is not None else ()
    source = JobSource(plan.command.config_name, plan.command.config_dir_path(),
                       (*plan.hydra_overrides, *point.overrides), assigned)
    command = source.command()
    try:
        config_dir = command.config_dir_path()
        root = _checked(lambda: compose_sweep_job(master, point.overrides, config_dir, JOB_NAME), command)
        subdir = _checked(lambda: _job_subdir(root, point.number), command)
        hydra = pin(hydra_only(root), {"hydra.sweep.subdir": subdir, "hydra.output_subdir": None})
        task, choices = split_hydra(root)
        rendered = _checked(lambda: _render(task, choices, source, plan.output_subdir), command)
    except ConfigError as error:
        plan.failures.append(PointFailure(point, error))
        return
    plan.jobs.append(PlannedJob(point, subdir, assigned, hydra, rendered.pack() if keep else None,
                                rendered.outputs))


def _job_subdir(root: DictConfig, number: int) -> str:
    """The job's folder inside the sweep folder, as Hydra's launchers name it (``hydra.job.num`` and
    ``hydra.job.id`` are the job's number), resolved once."""
    with open_dict(root.hydra.job):
        root.hydra.job.num = number
        root.hydra.job.id = str(number)
    return str(OmegaConf.select(root, "hydra.sweep.subdir"))


def _folder_problems(plan: SweepPlan) -> list[Problem]:
    """Two jobs in one folder, or a job folder outside the sweep folder: the sweep is refused."""
    problems = []
    by_folder: dict[str, list[int]] = {}
    for job in plan.jobs:
        relative = os.path.normpath(job.subdir)
        if os.path.isabs(job.subdir) or relative == "." or relative.startswith(".."):
            problems.append(Problem(
                key="hydra.sweep.subdir",
                message=f"puts job #{job.number} into {job.subdir!r}, which is not a folder inside the sweep "
                "folder (hydra.sweep.dir); nothing was launched or written",
                fix="name each job's folder relative to the sweep folder, e.g. the default "
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
    return problems


# What Hydra (multirun.yaml) and the main job (sweep_summary.csv) write into a sweep's own folder.
SWEEP_MARKERS = ("multirun.yaml", "sweep_summary.csv")


def sweep_jobs(folder: Path) -> list[str] | None:
    """The job folders (names, in the sweep's order) of a multirun sweep ``folder``; None when the folder
    is no sweep folder (it has neither of :data:`SWEEP_MARKERS`)."""
    if not any((folder / name).exists() for name in SWEEP_MARKERS):
        return None
    try:
        found = [child for child in folder.iterdir() if (child / RESOLVED).is_file()]
    except OSError:
        return []
    return [child.name for child in sorted(found, key=lambda c: (not c.name.isdigit(), int(c.name)
                                                                  if c.name.isdigit() else 0, c.name))]


def check_written_run(run_dir: Path) -> DictConfig:
    """The ``resolved.yaml`` of a run folder written before, checked like a config about to run: read
    as a user's file (limits), then the gate and every rule (``verl-roles launch --run-dir`` runs only
    what passes). A run's ``resolved.yaml`` holds no Hydra settings and no interpolation: one that does
    was not written by verl_roles, or was changed since."""
    path = run_dir / RESOLVED
    if not path.is_file():
        jobs = sweep_jobs(run_dir)
        if jobs is not None:
            shown = ", ".join(jobs[:8]) + (f" and {len(jobs) - 8} more" if len(jobs) > 8 else "")
            pick = f"`--run-dir {run_dir / jobs[0]}`" if jobs else "`--run-dir SWEEP_DIR/JOB`"
            raise ConfigError([Problem(
                key=f"--run-dir {run_dir}",
                message="is the folder of a multirun sweep (it holds "
                + " and ".join(name for name in SWEEP_MARKERS if (run_dir / name).exists())
                + "), not one run: it has no resolved.yaml of its own; each job of the sweep has its folder"
                + (f": {shown}" if jobs else ", and none holds a resolved.yaml yet"),
                fix=f"pick one job, e.g. {pick}; `verl-roles launch` trains one run at a time")])
        raise ConfigError([Problem(
            key=f"--run-dir {run_dir}", message="holds no resolved.yaml",
            fix="pass a folder written by `python -m verl_roles.main` (or by one job of its sweep)")])
    text = read_config_file(path, str(path))
    data = load_plain(text, str(path))
    problems = []
    if not isinstance(data, dict):
        raise ConfigError([Problem(key=str(path), message="is not a mapping of keys to values",
                                   fix="compose the run again with `python -m verl_roles.main`")])
    if "hydra" in data:
        problems.append(Problem(
            key=f"{path}: hydra", message="holds Hydra settings, which verl's own Hydra would act on; "
            "verl_roles never writes them into resolved.yaml",
            fix="compose the run again with `python -m verl_roles.main` (the file was changed or not "
            "written by verl_roles)"))
    if "${" in text:
        problems.append(Problem(
            key=str(path), message="holds an interpolation (`${...}`), which verl would resolve; verl_roles "
            "writes resolved.yaml with every value resolved",
            fix="compose the run again with `python -m verl_roles.main`"))
    if problems:
        raise ConfigError(problems)
    cfg = OmegaConf.create(data)
    findings = gate.task_problems(cfg, gate.surface(str(cfg.get(ENGINE_KEY, "")), release_of(cfg)))
    for message in findings.warnings:
        warnings.warn(message, ConfigWarning, stacklevel=2)
    try:
        validate(cfg, RULES, extra=list(findings.problems))
    except ConfigError as error:
        raise ConfigError([replace(p, origin=f"the file {path}") for p in error.problems]) from None
    return cfg
