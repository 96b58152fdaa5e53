"""The Python API: compose the same resolved, validated config the CLI writes."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig

from verl_roles.errors import ConfigError
from verl_roles.hydra_context import compose_raw
from verl_roles.hydra_errors import LIBRARY_ERRORS, CommandLine, raise_translated
from verl_roles.legacy import translate_overrides
from verl_roles.pipeline import PRIMARY_CONFIG, finalize


def compose(overrides: Sequence[str] = (), config_name: str = PRIMARY_CONFIG) -> DictConfig:
    """Compose ``config_name`` with Hydra ``overrides`` and return the resolved, validated config.

    Raises :class:`verl_roles.errors.ConfigError` for any user mistake, with the same message the
    CLI prints. Legacy keys (``actor_rollout_ref.model.lora_rank``...) are translated to their
    current keys with a deprecation warning. Safe to call many times in one process; leaves no
    global Hydra state behind.
    """
    overrides = translate_overrides(overrides)
    try:
        cfg = compose_raw(config_name, overrides)
        return finalize(cfg, config_name=config_name, overrides=overrides)
    except (ConfigError, *LIBRARY_ERRORS) as error:
        raise_translated(error, CommandLine(config_name, list(overrides)))
