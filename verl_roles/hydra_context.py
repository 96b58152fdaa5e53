"""Composition through Hydra's compose API, isolated from any Hydra state of the caller."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from hydra import compose as hydra_compose
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

CONFIG_MODULE = "verl_roles.conf"


@contextmanager
def isolated_hydra() -> Iterator[None]:
    """Initialise Hydra on our config tree and put back whatever global state was there before.

    The compose API keeps a process-wide GlobalHydra; we save the caller's (e.g. when called from
    inside another Hydra app), use our own, then restore theirs, so nothing leaks either way.
    """
    global_hydra = GlobalHydra.instance()
    saved = global_hydra.hydra if global_hydra.is_initialized() else None
    global_hydra.clear()
    try:
        with initialize_config_module(config_module=CONFIG_MODULE, version_base=None):
            yield
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            GlobalHydra.instance().initialize(saved)


def compose_raw(config_name: str, overrides: Sequence[str]) -> DictConfig:
    """Compose ``config_name`` with ``overrides`` and return Hydra's result (unresolved)."""
    with isolated_hydra():
        return hydra_compose(config_name=config_name, overrides=list(overrides))
