"""verl_roles: a verl-style Hydra/OmegaConf config system for PPO post-training of LLMs.

:func:`compose` is loaded on first use: importing the package (which every command line does first)
loads no Hydra, so Ctrl-C while a command starts reaches its entry point's handler, not a traceback."""

from typing import TYPE_CHECKING

from verl_roles.base.errors import ConfigError, Problem, VerlRolesError
from verl_roles.base.installation import VERSION
from verl_roles.base.notices import (
    ConfigDeprecationWarning,
    ConfigTranslationWarning,
    ConfigWarning,
    InertValueWarning,
)

__all__ = [
    "ConfigDeprecationWarning",
    "ConfigError",
    "ConfigTranslationWarning",
    "ConfigWarning",
    "InertValueWarning",
    "Problem",
    "VerlRolesError",
    "compose",
]
__version__ = VERSION

if TYPE_CHECKING:
    from verl_roles.api.composition import compose


def __getattr__(name: str) -> object:
    if name == "compose":
        from verl_roles.api.composition import compose

        return compose
    raise AttributeError(f"module 'verl_roles' has no attribute {name!r}")
