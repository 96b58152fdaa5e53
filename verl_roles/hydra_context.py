"""Composition through Hydra's compose API, isolated from any Hydra state of the caller."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig


def _find_conf_dir() -> Path:
    """The config tree: ``verl_roles/conf`` in an installed wheel, the top-level ``conf/`` in a checkout.

    Running from a source checkout (e.g. ``python -m verl_roles.main`` in the repo root) imports the
    package from the source tree, which has no ``verl_roles/conf``; the checkout's ``conf/`` is used then.
    """
    package_dir = Path(__file__).resolve().parent
    for candidate in (package_dir / "conf", package_dir.parent / "conf"):
        if (candidate / "ppo_trainer.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"verl_roles: no config tree (ppo_trainer.yaml) next to {package_dir}")


CONF_DIR = _find_conf_dir()


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
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            yield
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            GlobalHydra.instance().initialize(saved)


def compose_raw(config_name: str, overrides: Sequence[str]) -> DictConfig:
    """Compose ``config_name`` with ``overrides`` and return Hydra's result (unresolved)."""
    with isolated_hydra():
        return hydra_compose(config_name=config_name, overrides=list(overrides))
