"""verl_roles: a verl-style Hydra/OmegaConf config system for PPO post-training of LLMs."""

from verl_roles.api import compose
from verl_roles.errors import ConfigError, Problem, VerlRolesError
from verl_roles.notices import ConfigDeprecationWarning, ConfigWarning

__all__ = [
    "ConfigDeprecationWarning",
    "ConfigError",
    "ConfigWarning",
    "Problem",
    "VerlRolesError",
    "compose",
]
__version__ = "0.1.0"
