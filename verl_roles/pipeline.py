"""The one path every composed config takes, for the CLI and the Python API alike:
compose (Hydra) -> normalise legacy -> apply roles -> resolve -> validate -> write.

Hydra does the composing; :func:`finalize` runs the steps up to validation on its result. Validation
reads resolved values (an interpolated value is checked as the value it resolves to); nothing is
written until it has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from verl_roles import legacy, validate
from verl_roles.notices import ConfigDeprecationWarning, warn
from verl_roles.resolution import resolve_in_place
from verl_roles.roles import RoleSources, apply_roles

PRIMARY_CONFIG = "ppo_trainer"

DEPRECATED_CONFIG_NAMES = legacy.LEGACY_CONFIG_NAMES


def check_config_name(config_name: str) -> None:
    """Warn when a deprecated primary config name is used, naming the command that replaces it."""
    replacement = DEPRECATED_CONFIG_NAMES.get(config_name)
    if replacement is not None:
        warn(
            f"--config-name {config_name} is deprecated; it composes to exactly the same config as "
            f"`python -m verl_roles.main {' '.join(replacement)}` (config {PRIMARY_CONFIG}). "
            "Use that command instead.",
            ConfigDeprecationWarning,
        )


def resolve(cfg: DictConfig) -> DictConfig:
    """Replace every interpolation of ``cfg`` by its value, in place, and make it read-only.

    The result behaves like a config built from plain values: no struct flag, read-only.
    """
    resolve_in_place(cfg)
    OmegaConf.set_struct(cfg, None)
    OmegaConf.set_readonly(cfg, True)
    return cfg


def finalize(
    cfg: DictConfig,
    *,
    config_name: str = PRIMARY_CONFIG,
    overrides: Sequence[str] = (),
    choices: Mapping[str, str | None] | None = None,
    observe: Callable[[str, DictConfig], None] | None = None,
) -> DictConfig:
    """Run every step after composition and return the resolved, validated, read-only config.

    Works on ``cfg`` itself (a freshly composed config nobody else holds): no copy is made.
    ``overrides`` are the command-line overrides the config was composed with (already translated
    by :func:`verl_roles.legacy.translate_overrides`); legacy keys found in config files yield to them.
    ``choices`` are the chosen option of each config group (derived from ``overrides`` when not
    given); the roles step needs both to tell per-role command-line keys from config-file values.
    ``observe(step, cfg)``, when given, is called after each step that changes the unresolved config
    (``"legacy"``, ``"roles"``) with ``cfg`` as that step left it, to be read, never changed
    (``verl-roles explain`` uses it to say what each step did to a key).
    """
    check_config_name(config_name)
    legacy.normalize_config(cfg, overrides)
    if observe is not None:
        observe("legacy", cfg)
    # Roles work on the unresolved config, so a value set on a role reaches what follows it (the
    # reference follows the actor's layout).
    role_problems = apply_roles(cfg, RoleSources.from_command_line(overrides, choices))
    if observe is not None:
        observe("roles", cfg)
    # Rules read the resolved config: plain values are much cheaper to read than interpolations,
    # and nothing is written before finalize returns, so a problem still stops the run first.
    resolved = resolve(cfg)
    validate.validate(resolved, extra=role_problems)
    return resolved
