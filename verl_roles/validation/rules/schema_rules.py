"""Rules on every value by itself: its declared type, a mandatory value left at ``???``, and what is
never a setting at any key (NaN, text that is not Unicode)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from omegaconf import DictConfig

from verl_roles.base.errors import Problem
from verl_roles.omegaconf_adapter.nodes import missing_keys, scalar_leaves
from verl_roles.validation.rules.tables import RANGES
from verl_roles.validation.schema import type_problems


def values_have_their_declared_type(cfg: DictConfig) -> Iterable[Problem]:
    """The typed schema (verl_roles.validation.schema): one pass over the config, types only."""

    yield from type_problems(cfg)


def mandatory_values_are_set(cfg: DictConfig) -> Iterable[Problem]:
    """A value left at ``???`` would stop the trainer later; name it now."""
    yield from (
        Problem(
            key=key,
            message="is mandatory and has no value",
            fix=f"set it on the command line, e.g. {key}=...",
        )
        for key in missing_keys(cfg)
    )



def every_value_is_usable(cfg: DictConfig) -> Iterable[Problem]:
    """Two things are never a setting, at any key: NaN (the range table already refuses it at its own
    keys), and text that is not valid Unicode (a command-line argument in another encoding), which no
    file can hold."""
    checked = {row.key for row in RANGES}
    for key, value in scalar_leaves(cfg):
        if isinstance(value, float) and math.isnan(value) and key not in checked:
            yield Problem(key=key, message="is not a number (NaN)", value=value, show_value=True,
                          fix=f"set {key} to a finite number")
        elif isinstance(value, str) and not _is_unicode(value):
            yield Problem(key=key, message="holds bytes that are not UTF-8 text", value=value,
                          show_value=True, fix=f"write {key} in UTF-8 (check the encoding of your shell)")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
