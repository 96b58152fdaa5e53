"""Warnings a user should see but that do not stop a run (deprecations, ignored keys)."""

from __future__ import annotations

import warnings

from verl_roles.base.errors import Problem


class ConfigWarning(UserWarning):
    """A config is valid but something in it deserves the user's attention."""


class ConfigDeprecationWarning(ConfigWarning, FutureWarning):
    """A legacy name or key was used; the message names its replacement."""


class ConfigTranslationWarning(ConfigWarning):
    """A key the trainer itself reads (verl's flat LoRA keys) was read into the spelling of our config;
    the message says what it set. Nothing is deprecated: the key keeps working."""


class InertValueWarning(ConfigWarning):
    """A value the user set that verl would not read under the chosen settings (a KL coefficient with the
    KL term off...); the message names the setting that makes it inert and verl's lines."""


def warn(message: str, category: type[ConfigWarning] = ConfigWarning) -> None:
    """Emit a warning attributed to the caller of the public API, not to verl_roles internals."""
    warnings.warn(message, category, stacklevel=3)


def raised_as_error(warning: ConfigWarning) -> Problem:
    """A warning of ours that the caller's warnings filter turned into an exception
    (``warnings.simplefilter("error", InertValueWarning)``): the problem it stands for, worded as the
    warning, so the Python API still raises only ConfigError."""
    return Problem(
        key=type(warning).__name__,
        message=f"{warning} (a warning, raised as an error by this process's warnings filter)",
        fix="change what it names, or let verl_roles' warnings warn: "
        'warnings.simplefilter("default", verl_roles.ConfigWarning)',
    )
