"""Superseded by :mod:`verl_roles.releases` (kept while the commands move to it)."""

from __future__ import annotations

from verl_roles.releases import DEFAULT_RELEASE as VERL_TARGET_VERSION
from verl_roles.releases import extra, install_hint

VERL_EXTRA = extra(VERL_TARGET_VERSION)

__all__ = ["VERL_EXTRA", "VERL_TARGET_VERSION", "install_hint"]
