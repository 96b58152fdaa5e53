"""verl_roles: a verl-style Hydra/OmegaConf config system for PPO post-training of LLMs."""

from verl_roles.api import compose
from verl_roles.errors import ConfigError, Problem, VerlRolesError
from verl_roles.notices import ConfigDeprecationWarning, ConfigTranslationWarning, ConfigWarning

__all__ = [
    "ConfigDeprecationWarning",
    "ConfigError",
    "ConfigTranslationWarning",
    "ConfigWarning",
    "Problem",
    "VerlRolesError",
    "compose",
]
__version__ = "0.1.0"
