"""The main job: ``python -m verl_roles.main [hydra overrides]``.

A real ``@hydra.main`` app (so ``--cfg job``, ``--resolve``, ``--info defaults``, ``--config-dir`` and
``-m`` behave as in any Hydra app). Each job composes, validates and resolves the config, prints a
per-role summary and writes ``resolved.yaml`` and ``roles/<role>.yaml`` into Hydra's output directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from verl_roles import sweep
from verl_roles.cli_errors import report, run_reporting_errors
from verl_roles.cmdline import CommandLine
from verl_roles.config_tree import CONF_DIR
from verl_roles.errors import ConfigError, Problem, VerlRolesError
from verl_roles.hydra_context import memoized_hydra_main
from verl_roles.hydra_errors import LIBRARY_ERRORS, raise_translated, translate
from verl_roles.installation import print_shadowing_notice
from verl_roles.layout import PRIMARY_CONFIG, ROLE_SECTIONS
from verl_roles.legacy import read_command_line
from verl_roles.output import write_run_files
from verl_roles.pipeline import finalize
from verl_roles.summary import summarize


def job_command_line(hydra_cfg: DictConfig) -> CommandLine:
    """The command line of one job, as Hydra recorded it (a sweep job's own values, unresolved: an
    override's value may itself be an interpolation such as `${trainer.nnodes}`)."""
    config_dirs = [str(s.path) for s in hydra_cfg.runtime.config_sources if s.provider == "command-line"]
    return CommandLine.of(
        sweep.task_overrides(hydra_cfg),
        config_name=hydra_cfg.job.config_name or PRIMARY_CONFIG,
        config_dir=config_dirs[0] if config_dirs else None,
    )


def run_job(cfg: DictConfig) -> Path:
    """Finalize one composed config and write its files; returns the output directory."""
    hydra_cfg = HydraConfig.get()
    choices = OmegaConf.to_container(hydra_cfg.runtime.choices, resolve=False)
    resolved = finalize(cfg, command=job_command_line(hydra_cfg), choices=choices)
    out_dir = Path(hydra_cfg.runtime.output_dir)
    write_run_files(resolved, out_dir)
    print(summarize(resolved))
    roles = ", ".join(f"roles/{name}.yaml" for name in ROLE_SECTIONS)
    print(f"verl_roles: wrote resolved.yaml, {roles} to {_display(out_dir)}")
    return out_dir


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# Errors of the jobs of the current invocation. A job records its error and returns normally, so
# Hydra neither prints its own report nor stops the other jobs of a sweep.
JOB_ERRORS: list[Exception] = []


@hydra.main(version_base=None, config_path=str(CONF_DIR), config_name=PRIMARY_CONFIG)
def hydra_app(cfg: DictConfig) -> dict[str, str]:
    """One job; returns its outcome (``sweep.ok()`` / ``sweep.failed(message)``) for the sweep summary."""
    not_composed = sweep.composition_error(cfg)
    if not_composed is not None:
        print(f"verl_roles error: {not_composed}", file=sys.stderr)
        JOB_ERRORS.append(ConfigError([Problem(key="sweep job", message=not_composed)]))
        return sweep.failed(not_composed)
    try:
        run_job(cfg)
    except (VerlRolesError, HydraException, OmegaConfBaseException) as error:
        JOB_ERRORS.append(error)
        return sweep.failed(report(translate(error, job_command_line(HydraConfig.get()))))
    return sweep.ok()


def main(argv: list[str] | None = None) -> int:
    """Run the Hydra app on ``argv`` (default: the process arguments); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    print_shadowing_notice()
    return run_reporting_errors(lambda: _invoke(args), args)


def _invoke(args: list[str]) -> None:
    typed = CommandLine.parse(args)
    # Legacy keys must be rewritten before Hydra sees them (it rejects unknown keys while composing),
    # for every job of a sweep alike.
    command = read_command_line(typed).command
    saved_argv = sys.argv
    sys.argv = [saved_argv[0] if saved_argv else "verl_roles.main", *command.argv()]
    JOB_ERRORS.clear()
    sweep.take_last_summary()
    try:
        with memoized_hydra_main():
            hydra_app()
    except (VerlRolesError, *LIBRARY_ERRORS) as error:
        raise_translated(error, command)
    finally:
        sys.argv = saved_argv
    summary = sweep.take_last_summary()
    if summary is not None:
        if summary.failures:
            raise ConfigError([Problem(key="sweep", message=sweep.sweep_error_text(summary))])
        return
    if JOB_ERRORS:
        error = JOB_ERRORS[0]
        raise_translated(error, command)


if __name__ == "__main__":
    sys.exit(main())
