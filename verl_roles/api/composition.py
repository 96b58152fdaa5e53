"""The API: the one way the commands reach composition, and ``verl_roles.compose``, its public face.

:func:`compose` composes the same resolved, validated config the CLI writes. The other names are the
composition tier's services the commands use (the tier map, verl_roles/tiers.py, lets nothing above
composition import it except this module): Hydra's composition (with and without its ``hydra`` node,
and a sweep's job), the key paths of a composition, the stock config of an engine, the files of a
defaults list and the user's file that sets a key, the main job as a Hydra app, and what a served run
hands Hydra.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from omegaconf import DictConfig

from verl_roles.base.errors import (
    ConfigError,
    Problem,
    caused_by_interrupt,
    current_folder_problem,
    internal_error,
)
from verl_roles.base.layout import PRIMARY_CONFIG
from verl_roles.base.notices import ConfigWarning, raised_as_error
from verl_roles.hydra_adapter.app import job_outcome, run_app
from verl_roles.hydra_adapter.compose import (
    LoadedDefault,
    compose_full,
    compose_raw,
    compose_sweep_job,
    compose_with_choices,
    composed_key_paths,
    defaults_files,
    defaults_layers,
    file_origin,
    split_hydra,
    stock_config,
    user_file_keys,
)
from verl_roles.hydra_adapter.serving import JOB_KEY, Served, hydra_only, pin, served_job
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.legacy import read_command_line
from verl_roles.messages.wording import LIBRARY_ERRORS, raise_translated
from verl_roles.steps.pipeline import StepInputs, finalize

__all__ = [
    "JOB_KEY",
    "LoadedDefault",
    "Served",
    "compose",
    "compose_full",
    "compose_raw",
    "compose_sweep_job",
    "compose_with_choices",
    "composed_key_paths",
    "defaults_files",
    "defaults_layers",
    "file_origin",
    "hydra_only",
    "job_outcome",
    "pin",
    "run_app",
    "served_job",
    "split_hydra",
    "step_inputs",
    "stock_config",
]


def step_inputs(command: CommandLine, choices: dict[str, str | None]) -> StepInputs:
    """What the steps after composition read besides the config: the command line, the group choices,
    the stock config of an engine, and where a user's file set a key (for messages)."""

    def origin(key: str) -> str | None:
        return file_origin(command.config_name, command.texts(), command.config_dir_path(), key)

    def file_keys() -> dict[str, str]:
        if command.config_dir_path() is None and not any("hydra.searchpath" in t for t in command.texts()):
            return {}  # no folder of the user's: nothing to load
        return user_file_keys(command.config_name, command.texts(), command.config_dir_path())

    return StepInputs(command, choices, stock_config, origin, file_keys)


def compose(
    overrides: Sequence[str] = (),
    config_name: str = PRIMARY_CONFIG,
    config_dir: str | os.PathLike[str] | None = None,
) -> DictConfig:
    """Compose ``config_name`` with Hydra ``overrides`` and return the resolved, validated config.

    ``config_name`` and ``config_dir`` mean what ``--config-name`` and ``--config-dir`` mean for
    ``python -m verl_roles.main`` (``ppo_megatron_trainer`` and ``ppo_megatron_trainer.yaml`` are the
    same name). Raises :class:`verl_roles.base.errors.ConfigError` for any user mistake, with the same
    message the CLI prints, and for arguments of the wrong type; nothing else. Legacy keys
    (``actor_rollout_ref.model.lora_rank``...) are translated to their current keys with a
    :class:`verl_roles.base.notices.ConfigTranslationWarning` naming the old key and the new one. Safe to
    call many times in one process; leaves no global Hydra state behind.
    """
    overrides, config_name, config_dir = _arguments(overrides, config_name, config_dir)
    command = CommandLine.of(overrides, config_name, config_dir)
    try:
        command = read_command_line(command).command
        cfg, choices = compose_with_choices(command.config_name, command.texts(), command.config_dir_path())
        return finalize(cfg, step_inputs(command, choices))
    except (ConfigError, *LIBRARY_ERRORS) as error:
        if caused_by_interrupt(error):
            raise KeyboardInterrupt from error
        raise_translated(error, command, composed_key_paths)
    except ConfigWarning as warning:
        raise ConfigError([raised_as_error(warning)]) from warning
    except Exception as error:  # noqa: BLE001 - the API raises only ConfigError (the boundary of the API)
        if caused_by_interrupt(error):
            raise KeyboardInterrupt from error
        raise ConfigError([internal_error(error)]) from error


def _arguments(
    overrides: object, config_name: object, config_dir: object
) -> tuple[list[str], str, str | None]:
    problems = []
    if isinstance(overrides, str | bytes) or not isinstance(overrides, Sequence | tuple | list):
        problems.append(Problem(
            key="overrides", message=f"must be a list of override strings, got {type(overrides).__name__}",
            fix='pass e.g. ["model_engine=megatron", "critic.optim.lr=2e-5"]'))
        overrides = []
    elif not all(isinstance(item, str) for item in overrides):
        wrong = next(item for item in overrides if not isinstance(item, str))
        problems.append(Problem(
            key="overrides", message=f"holds {wrong!r} ({type(wrong).__name__}); every override is a string",
            fix='write each as text, e.g. "trainer.nnodes=2"'))
    if not isinstance(config_name, str) or not config_name:
        problems.append(Problem(key="config_name", message=f"must be a config name, got {config_name!r}",
                                fix=f'pass e.g. config_name="{PRIMARY_CONFIG}"'))
    if isinstance(config_dir, os.PathLike) and isinstance(os.fspath(config_dir), str):
        config_dir = os.fspath(config_dir)  # a pathlib.Path is a folder path as much as its text is
    if config_dir is not None and not isinstance(config_dir, str):
        problems.append(Problem(
            key="config_dir", message=f"must be a folder path or None, got {config_dir!r}",
            fix='pass e.g. config_dir="myconf" (a str or a pathlib.Path), or leave it out'))
    gone = current_folder_problem()
    if gone is not None:
        problems.append(gone)
    if problems:
        raise ConfigError(problems)
    return list(overrides), config_name, config_dir  # type: ignore[arg-type, return-value]
