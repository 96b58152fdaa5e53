"""The Python API: compose the same resolved, validated config the CLI writes."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig

from verl_roles.cmdline import CommandLine
from verl_roles.errors import ConfigError
from verl_roles.hydra_adapter.loader import compose_with_choices, composed_key_paths, stock_config
from verl_roles.layout import PRIMARY_CONFIG
from verl_roles.legacy import read_command_line
from verl_roles.pipeline import StepInputs, finalize
from verl_roles.wording import LIBRARY_ERRORS, raise_translated


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
