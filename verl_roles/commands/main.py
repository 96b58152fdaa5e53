"""The main job: ``python -m verl_roles.main [hydra overrides]``.

A Hydra app (so ``--cfg job``, ``--resolve``, ``--info defaults``, ``--config-dir`` and ``-m`` behave as
in any Hydra app; :func:`verl_roles.api.run_app`). Each job composes, validates and
resolves the config, prints a per-role summary and writes ``resolved.yaml`` and ``roles/<role>.yaml``
into Hydra's output directory.

A job never ends the invocation with an exception inside Hydra (Hydra would print its own report): a
single run's error is kept by the job (:class:`MainJob`) and reported when Hydra returns; each job of a
sweep returns its outcome, the sweep callback gathers them into ``sweep_summary.csv``, and the
invocation fails at the end when any job failed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from verl_roles.api import composed_key_paths, composition_error, run_app, stock_config
from verl_roles.cmdline import CONFIG_PATH, EXPERIMENTAL_RERUN, HELP, HYDRA_FLAGS, CommandLine, FlagSpec
from verl_roles.commands import sweep
from verl_roles.commands.check_sweep import CHECK_SWEEP, failed_check_error, run_check
from verl_roles.commands.main_help import main_help
from verl_roles.commands.reporting import report, run_reporting_errors
from verl_roles.commands.show import composition_note, mark_hydra_copy, shows_composition
from verl_roles.config_tree import CONF_DIR
from verl_roles.errors import ConfigError, Problem, VerlRolesError
from verl_roles.installation import print_shadowing_notice
from verl_roles.layout import PRIMARY_CONFIG, ROLE_SECTIONS
from verl_roles.legacy import read_command_line
from verl_roles.output import unwritable, write_atomic, write_run_files
from verl_roles.pipeline import StepInputs, finalize
from verl_roles.summary import summarize
from verl_roles.wording import LIBRARY_ERRORS, raise_translated, translate


def job_command_line(hydra_cfg: DictConfig, overrides: list[str] | None = None) -> CommandLine:
    """The command line of one job as Hydra recorded it: its config name, the ``--config-dir`` among
    the config sources, and its overrides (a sweep job's own values, unresolved: an override's value
    may itself be an interpolation such as `${trainer.nnodes}`)."""
    config_dirs = [str(s.path) for s in hydra_cfg.runtime.config_sources if s.provider == "command-line"]
    return CommandLine.of(
        sweep.task_overrides(hydra_cfg) if overrides is None else overrides,
        config_name=hydra_cfg.job.config_name or PRIMARY_CONFIG,
        config_dir=config_dirs[0] if config_dirs else None,
    )


def run_job(cfg: DictConfig) -> Path:
    """Finalize one composed config and write its files; returns the output directory."""
    hydra_cfg = HydraConfig.get()
    choices = OmegaConf.to_container(hydra_cfg.runtime.choices, resolve=False)
    inputs = StepInputs(job_command_line(hydra_cfg), choices, stock_config)
    resolved = finalize(cfg, inputs)
    out_dir = Path(hydra_cfg.runtime.output_dir)
    # Everything that can fail runs before the first run file is written.
    summary = summarize(resolved)
    if hydra_cfg.output_subdir is not None:
        mark_hydra_copy(out_dir / str(hydra_cfg.output_subdir) / "config.yaml", out_dir / "resolved.yaml")
    write_run_files(resolved, out_dir, replace_a_run=_folder_chosen_by_user(hydra_cfg))
    print(summary)
    roles = ", ".join(f"roles/{name}.yaml" for name in ROLE_SECTIONS)
    print(f"verl_roles: wrote resolved.yaml, {roles} to {_display(out_dir)}")
    return out_dir


def _folder_chosen_by_user(hydra_cfg: DictConfig) -> bool:
    """True when the command line names the job's folder (``hydra.run.dir=...``, or for a sweep
    ``hydra.sweep.dir`` / ``hydra.sweep.subdir``): only then may a run replace another run's files."""
    sweeping = hydra_cfg.mode == RunMode.MULTIRUN
    keys = ("hydra.sweep.dir", "hydra.sweep.subdir") if sweeping else ("hydra.run.dir",)
    typed = [str(item).lstrip("+") for item in hydra_cfg.overrides.hydra]
    return any(item.split("=", 1)[0] in keys for item in typed)


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@dataclass
class MainJob:
    """The task function Hydra calls for every job of one invocation.

    Returns the job's outcome (``sweep.ok()`` / ``sweep.failed(headline)``) for the sweep summary; a
    failed sweep job also writes its full error to ``error.txt`` in its directory. The error of a single
    run is kept in :attr:`error` for the invocation to report.
    """

    error: BaseException | None = field(default=None)
    # The run directories this process's jobs wrote (`verl-roles launch` trains on them).
    run_dirs: list[Path] = field(default_factory=list)

    def __call__(self, cfg: DictConfig) -> dict[str, str]:
        not_composed = composition_error(cfg)
        if not_composed is not None:
            message, headline = not_composed
            print(f"verl_roles error: {message}", file=sys.stderr)
            return _failed_job(message, headline)
        try:
            self.run_dirs.append(run_job(cfg))
        except (VerlRolesError, HydraException, OmegaConfBaseException) as error:
            hydra_cfg = HydraConfig.get()
            translated = translate(error, job_command_line(hydra_cfg), composed_key_paths)
            if hydra_cfg.mode != RunMode.MULTIRUN:
                self.error = error
                return sweep.failed(translated.headline())
            return _failed_job(report(translated), translated.headline())
        return sweep.ok()


def _failed_job(message: str, headline: str) -> dict[str, str]:
    """A failed sweep job: its full error into ``error.txt`` in its directory, its headline returned."""
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    write_atomic(out_dir / sweep.ERROR_FILE, message.rstrip("\n") + "\n")
    return sweep.failed(headline)


def describe_failure(error: BaseException, master_config: DictConfig, overrides: list[str]) -> ConfigError:
    """A sweep job whose overrides do not compose, worded as a single run with them would be."""
    command = job_command_line(master_config.hydra, overrides)
    return translate(error, command, composed_key_paths)


def _refuse_config_path(command: CommandLine) -> None:
    """``--config-path DIR`` replaces the config tree, read relative to the package; verl's launch scripts
    pass their own folder that way (``--config-path=config``). Here the folder goes next to ours."""
    flag = command.flag(CONFIG_PATH)
    if flag is None or flag.value is None:
        return
    if Path(flag.value).is_absolute() and Path(flag.value).resolve() == CONF_DIR:
        return
    folder = Path(flag.value).expanduser()
    if folder.is_absolute():
        read_as = "a folder without ppo_trainer and the groups it needs"
        missing = f" (there is no folder {flag.value!r} either)"
    else:
        read_as = "a folder that Hydra reads relative to the verl_roles package, where there is none"
        missing = f" (there is no folder {flag.value!r} in {Path.cwd()} either)"
    raise ConfigError([Problem(
        key=f"{flag.typed_name} {flag.value}",
        message=(
            f"replaces verl_roles' own config tree with {read_as} (verl's launch scripts pass their own "
            "config folder this way)"
        ),
        fix=(
            f"write `--config-dir {flag.value}` instead: it adds your folder to the search path next to "
            "verl_roles' configs, so --config-name finds your primary config there and its defaults find "
            "ppo_trainer and the groups here" + ("" if folder.is_dir() else missing)
        ),
    )])


# Hydra's flags and the main job's own.
MAIN_FLAGS: tuple[FlagSpec, ...] = (*HYDRA_FLAGS, CHECK_SWEEP)


def _check_sweep_first(command: CommandLine) -> None:
    """``--check-sweep``: check every point of the sweep (as ``verl-roles check-sweep``) and stop, exit
    code 2, before launching anything when one fails."""
    if not command.is_multirun:
        raise ConfigError([Problem(
            key=CHECK_SWEEP.name,
            message="checks the points of a sweep, but this is a single run (no -m)",
            fix="add -m to run a sweep, or drop --check-sweep (a single run is checked before it writes)",
        )])
    check = run_check(command)
    if not check.ok:
        raise failed_check_error(check)


def main(argv: list[str] | None = None) -> int:
    """Run the main job on ``argv`` (default: the process arguments); return the exit code."""
    return run_main_job(list(sys.argv[1:] if argv is None else argv))[0]


def run_main_job(args: list[str]) -> tuple[int, list[Path]]:
    """The main job on ``args``: its exit code and the run directories its jobs wrote here."""
    args, job = list(args), MainJob()
    print_shadowing_notice()
    return run_reporting_errors(lambda: _invoke(args, job), args), job.run_dirs


def _invoke(args: list[str], job: MainJob) -> None:
    # Legacy keys must be rewritten before Hydra sees them (it rejects unknown keys while composing),
    # for every job of a sweep alike.
    command = read_command_line(CommandLine.parse(args, MAIN_FLAGS)).command
    command.config_dir_path()  # a --config-dir that is not a folder is refused before Hydra starts
    if command.flag(HELP) is not None:
        print(main_help(command))
        return
    _refuse_config_path(command)
    if command.flag(CHECK_SWEEP) is not None:
        command = command.without(CHECK_SWEEP)
        _check_sweep_first(command)
    if command.flag(EXPERIMENTAL_RERUN) is not None:
        raise ConfigError([Problem(
            key="--experimental-rerun",
            message="is not supported: Hydra's rerun unpickles a file of a previous run, and the main job "
            "never reads pickled files",
            fix="run the main job again with that run's overrides (its .hydra/overrides.yaml lists them)",
        )])
    try:
        ran = run_app(job, command.argv(), describe_failure)
    except (VerlRolesError, *LIBRARY_ERRORS) as error:
        raise_translated(error, command, composed_key_paths)
    except (OSError, ValueError) as error:
        # Hydra sets up the output folder (its .hydra/ files, the job log) before the job runs; a
        # folder it cannot write is the same user-facing problem as one the job cannot write.
        cause = error if isinstance(error, OSError) else error.__cause__
        if not isinstance(cause, OSError) or cause.errno is None:
            raise
        raise unwritable(cause) from error
    if shows_composition(command):
        print(composition_note(command), file=sys.stderr)
    if ran.sweep_dir is not None:
        summary = sweep.read_records(Path(ran.sweep_dir))
        if summary is not None and summary.failures:
            raise ConfigError([Problem(key="sweep", message=sweep.sweep_error_text(summary))])
        return
    if job.error is not None:
        raise_translated(job.error, command, composed_key_paths)
