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
from dataclasses import dataclass, field, replace
from pathlib import Path

from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from verl_roles.api.composition import (
    Served,
    compose_full,
    composed_key_paths,
    hydra_only,
    pin,
    split_hydra,
    step_inputs,
)
from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.layout import ENGINE_KEY
from verl_roles.base.limits import read_config_file
from verl_roles.base.notices import ConfigWarning
from verl_roles.base.releases import release_of
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.legacy import read_command_line
from verl_roles.messages.library_messages import sweep_in_a_run
from verl_roles.messages.wording import LIBRARY_ERRORS, translate
from verl_roles.omegaconf_adapter.yaml_dialect import dump, load_plain
from verl_roles.runs import sweep_isolation
from verl_roles.runs.run_files import RESOLVED, run_files
from verl_roles.runs.write_protocol import MARKER
from verl_roles.steps.pipeline import SettingsReport, finalize
from verl_roles.validation import gate, inert, placeholders
from verl_roles.validation.rules import RULES, validate
from verl_roles.views.summary import summarize

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
    folder is off), the summary it prints, the resolved values that decide where it writes, and the keys
    the user set that verl would not read (a sweep over them trains the same config twice), and the
    paths only the user can know still at their placeholders ([key, what, placeholder])."""

    files: dict[str, str]
    summary: str
    outputs: dict[str, object]
    inert: list[list[str]] = field(default_factory=list)
    unset: list[list[str]] = field(default_factory=list)

    def pack(self) -> bytes:
        content = [self.files, self.summary, self.outputs, self.inert, self.unset]
        return zlib.compress(json.dumps(content).encode("utf-8"), 3)

    @staticmethod
    def unpack(data: bytes) -> Rendered:
        return Rendered(*json.loads(zlib.decompress(data).decode("utf-8")))


def _finalize(task: DictConfig, choices: dict[str, str | None],
              source: JobSource) -> tuple[DictConfig, SettingsReport]:
    """The steps, the gate and the rules on a composed task config (in place), with the planned values;
    and what the user's settings come to."""
    if source.assigned:
        with open_dict(task):
            for key, value in source.assigned:
                OmegaConf.update(task, key, value, merge=False)
    command = read_command_line(source.command()).command
    reports: list[SettingsReport] = []

    def observe(report: object, _: DictConfig) -> None:
        if isinstance(report, SettingsReport):
            reports.append(report)

    resolved = finalize(task, step_inputs(command, choices), observe)
    return resolved, reports[0]


def render(task: DictConfig, choices: dict[str, str | None], source: JobSource,
            output_subdir: str | None, *, files: bool = True) -> Rendered:
    """The job ``task`` finalized and checked: its files and summary (unless ``files`` is False: a check
    that writes nothing needs only the verdict and where the job would write)."""
    before = _hydra_copy(task, output_subdir) if files else None
    resolved, settings = _finalize(task, choices, source)
    outputs = {key: OmegaConf.select(resolved, key, default=None) for key in sweep_isolation.READ_KEYS}
    plain = {k: _plain(v) for k, v in outputs.items()}
    inert_keys = [[value.key, value.setting] for value in settings.inert]
    unset = [[path.key, path.what, str(value)] for path, value in settings.unset]
    if not files:
        return Rendered({}, "", plain, inert_keys, unset)
    written = run_files(resolved)
    if before is not None:
        written = {**written, f"{output_subdir}/config.yaml": before}
    summary = summarize(resolved, inert.summary_line(settings.inert),
                        placeholders.summary_line(list(settings.unset)))
    return Rendered(written, summary, plain, inert_keys, unset)


def _plain(value: object) -> object:
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def _hydra_copy(task: DictConfig, output_subdir: str | None) -> str | None:
    """The text of ``.hydra/config.yaml`` for ``task`` (Hydra's composition), None when it is off."""
    if output_subdir is None:
        return None
    resolved = os.path.relpath("resolved.yaml", output_subdir)
    return HYDRA_COPY_NOTE.format(resolved=resolved) + dump(OmegaConf.to_container(task, resolve=False))


def render_job(source: JobSource, output_subdir: str | None, *, files: bool = True) -> Rendered:
    """Compose and render one job from scratch: what a job in another process does."""
    command = read_command_line(source.command()).command
    root = compose_command(command, command.texts())
    task, choices = split_hydra(root)
    return checked(lambda: render(task, choices, source, output_subdir, files=files), command)


def compose_command(
    command: CommandLine, overrides: list[str], run_mode: RunMode = RunMode.RUN
) -> DictConfig:
    return checked(lambda: compose_full(command.config_name, overrides, command.config_dir_path(),
                                                  run_mode, JOB_NAME),
                    command)


def checked(action, command: CommandLine):  # noqa: ANN001, ANN202 - a thunk and what it returns
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
    root = compose_command(command, command.texts(), RunMode.MULTIRUN)
    if OmegaConf.select(root, "hydra.mode") == RunMode.MULTIRUN:
        return True
    swept = next(o for o in command.overrides if o.is_sweep)
    raise ConfigError([sweep_in_a_run(swept.text)])


def compose_run(command: CommandLine) -> DictConfig:
    """The full composition of a single run (its ``hydra`` node included), gated."""
    return compose_command(command, command.texts())


def plan_run(command: CommandLine, root: DictConfig) -> RunPlan:
    """Validate the single run ``command`` composed as ``root`` (from :func:`compose_run`) and render
    what it writes; nothing is written. Raises the :class:`ConfigError` the run would stop with."""
    target = Path(os.path.abspath(str(checked(lambda: OmegaConf.select(root, "hydra.run.dir"), command))))
    output_subdir = output_subdir_of(root)
    problems = (run_folder_problems(target, "hydra.run.dir") + output_subdir_problems(output_subdir)
                + job_name_problems(root))
    if problems:
        raise ConfigError(problems)
    hydra = hydra_only(root)
    task, choices = split_hydra(root)
    source = JobSource(command.config_name, command.config_dir_path(), tuple(command.texts()))
    rendered = checked(lambda: render(task, choices, source, output_subdir), command)
    return RunPlan(target, output_subdir, rendered, hydra)


def run_folder_problems(target: Path, setting: str) -> list[Problem]:
    """A run's (a sweep's) folder and the current folder are named in the files of the run (Hydra's
    record of it, a sweep's multirun.yaml and sweep_summary.csv), which are UTF-8: a path holding a byte
    of another encoding (a folder named in Latin-1) is refused before anything is written, with the same
    verdict for a run, a sweep and check-sweep; the run's folder is named only when it is not inside the
    current folder. (A typed argument holding such a byte is refused with the command line:
    :func:`verl_roles.inputs.cmdline.not_text_problem`.)"""
    cwd = os.getcwd()
    folders = [("the current folder", cwd, "the folder the command runs in")]
    if not _is_text(cwd) and str(target).startswith(cwd + os.sep):
        folders = folders[:1]
    else:
        folders.append((setting, str(target), "the folder the run would be written to"))
    return [Problem(
        key=key, message=f"is {path}, {where}; its path holds a byte that is not UTF-8 text, and the files "
        "of a run (Hydra's record of it, a sweep's summary) name it in UTF-8",
        fix="run from, and write to, folders whose paths are UTF-8 text (rename the folder, e.g. "
        "`convmv -f latin1 -t utf-8 NAME`)",
    ) for key, path, where in folders if not _is_text(path)]


def _is_text(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def output_subdir_of(root: DictConfig) -> str | None:
    value = OmegaConf.select(root, "hydra.output_subdir")
    return None if value is None else str(value)


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


def job_name_problems(root: DictConfig) -> list[Problem]:
    """``hydra.job.name`` names the job's log file (``<run folder>/<name>.log``): a name with a folder part
    puts the log elsewhere (``../x`` outside the run's folder, where nothing removes it)."""
    name = OmegaConf.select(root, "hydra.job.name", default=None)
    if name is None:
        return []
    text = str(name)
    if text and text not in (".", "..") and not any(mark in text for mark in ("/", "\\", "\0")):
        return []
    return [Problem(
        key="hydra.job.name",
        message=f"is {text!r}: Hydra names the job's log file after it, inside the run's folder, and this "
        "name is no plain file name, so the log would go elsewhere",
        fix="give the job a plain name (letters, digits, `-`, `_`, `.`), e.g. hydra.job.name=ppo",
    )]


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
