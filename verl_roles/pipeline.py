"""The one path every composed config takes, for the CLI and the Python API alike:
compose (Hydra) -> normalise legacy -> apply roles -> resolve -> validate -> write.

Hydra does the composing; :func:`finalize` runs the steps up to validation on its result. Validation
reads resolved values (an interpolated value is checked as the value it resolves to); nothing is
written until it has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from omegaconf import DictConfig, OmegaConf

from verl_roles import legacy, validate
from verl_roles.cmdline import CommandLine
from verl_roles.resolution import resolve_in_place
from verl_roles.roles import RoleSources, apply_roles


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
    command: CommandLine,
    choices: Mapping[str, str | None] | None = None,
    observe: Callable[[str, DictConfig], None] | None = None,
) -> DictConfig:
    """Run every step after composition and return the resolved, validated, read-only config.

    Works on ``cfg`` itself (a freshly composed config nobody else holds): no copy is made.
    ``command`` is the command line the config was composed with (already read by
    :func:`verl_roles.legacy.read_command_line`); legacy keys found in config files yield to it.
    ``choices`` are the chosen option of each config group (Hydra's runtime choices; the command
    line's own when not given); the roles step needs both to tell per-role command-line keys from
    config-file values.
    ``observe(step, cfg)``, when given, is called after each step that changes the unresolved config
    (``"legacy"``, ``"roles"``) with ``cfg`` as that step left it, to be read, never changed
    (``verl-roles explain`` uses it to say what each step did to a key).
    """
    legacy.normalize_config(cfg, command)
    if observe is not None:
        observe("legacy", cfg)
    # Roles work on the unresolved config, so a value set on a role reaches what follows it (the
    # reference follows the actor's layout).
    role_problems = apply_roles(cfg, RoleSources.of(command, choices))
    if observe is not None:
        observe("roles", cfg)
    # Rules read the resolved config: plain values are much cheaper to read than interpolations,
    # and nothing is written before finalize returns, so a problem still stops the run first.
    resolved = resolve(cfg)
    validate.validate(resolved, extra=role_problems)
    return resolved
