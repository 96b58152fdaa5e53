"""The API: the one way the commands reach composition, and ``verl_roles.compose``, its public face.

:func:`compose` composes the same resolved, validated config the CLI writes. The other names are the
composition tier's services the commands use (the tier map, verl_roles/tiers.py, lets nothing above
composition import it except this module): Hydra's raw composition, the key paths of a composition,
the stock config of an engine, the files of a defaults list, and the main job as a Hydra app.
"""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig

from verl_roles.cmdline import CommandLine
from verl_roles.errors import ConfigError
from verl_roles.hydra_adapter.app import AppRun, job_outcome, run_app
from verl_roles.hydra_adapter.loader import (
    LoadedDefault,
    compose_raw,
    compose_with_choices,
    composed_key_paths,
    composition_error,
    defaults_files,
    defaults_layers,
    stock_config,
)
from verl_roles.layout import PRIMARY_CONFIG
from verl_roles.legacy import read_command_line
from verl_roles.pipeline import StepInputs, finalize
from verl_roles.wording import LIBRARY_ERRORS, raise_translated

__all__ = [
    "AppRun",
    "LoadedDefault",
    "compose",
    "compose_raw",
    "compose_with_choices",
    "composed_key_paths",
    "composition_error",
    "defaults_files",
    "defaults_layers",
    "job_outcome",
    "run_app",
    "stock_config",
]


def compose(
    overrides: Sequence[str] = (), config_name: str = PRIMARY_CONFIG, config_dir: str | None = None
) -> DictConfig:
    """Compose ``config_name`` with Hydra ``overrides`` and return the resolved, validated config.

    ``config_name`` and ``config_dir`` mean what ``--config-name`` and ``--config-dir`` mean for
    ``python -m verl_roles.main`` (``ppo_megatron_trainer`` and ``ppo_megatron_trainer.yaml`` are the
    same name). Raises :class:`verl_roles.errors.ConfigError` for any user mistake, with the same
    message the CLI prints. Legacy keys (``actor_rollout_ref.model.lora_rank``...) are translated to
    their current keys with a deprecation warning. Safe to call many times in one process; leaves no
    global Hydra state behind.
    """
    command = CommandLine.of(overrides, config_name, config_dir)
    try:
        command = read_command_line(command).command
        cfg, choices = compose_with_choices(command.config_name, command.texts(), command.config_dir_path())
        return finalize(cfg, StepInputs(command, choices, stock_config))
    except (ConfigError, *LIBRARY_ERRORS) as error:
        raise_translated(error, command, composed_key_paths)
