"""Property tests (hypothesis): whatever overrides, role option file or slime file a user hands
``verl_roles.compose``, it returns a config or raises ConfigError, never anything else.

A bounded number of examples per property keeps the suite fast; ``benchmarks/fuzz_long.py
--examples N`` runs the same properties much longer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from bad_inputs import KNOWN_FAILURES
from fuzz import check_option_file, check_overrides, check_slime_file, option_files, overrides, slime_files
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack


def ci(examples: int) -> settings:
    """Few examples, the same ones on every run (derandomized, no example database on disk): the suite
    stays fast and a failure reproduces (unshrunk: the long run in benchmarks/ shrinks). An option file
    example costs most (a changed config folder is read again), so it gets fewer."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    phases=(Phase.explicit, Phase.generate),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def known(name: str) -> Callable[[T], T]:
    """The property's entry of KNOWN_FAILURES (tests/bad_inputs.py), as an expected failure."""
    reason = KNOWN_FAILURES.get(f"fuzz:{name}")
    return pytest.mark.xfail(reason=reason, strict=True) if reason else (lambda test: test)

T = TypeVar("T")
ENGINES = st.sampled_from([[], ["model_engine=megatron"]])


@known("overrides")
@ci(25)
@given(items=overrides())
def test_any_overrides_compose_or_raise_config_error(items: list[str]):
    check_overrides(items)


@known("option-files")
@ci(6)
@given(content=option_files(), extra=ENGINES)
def test_any_role_option_file_composes_or_raises_config_error(
    content: bytes, extra: list[str], tmp_path_factory: pytest.TempPathFactory
):
    check_option_file(_folder(tmp_path_factory, "options"), content, extra)


@known("slime-files")
@ci(25)
@given(content=slime_files())
def test_any_slime_file_composes_or_raises_config_error(
    content: bytes, tmp_path_factory: pytest.TempPathFactory
):
    check_slime_file(_folder(tmp_path_factory, "slime"), content, [])


_FOLDERS: dict[str, Path] = {}


def _folder(factory: pytest.TempPathFactory, name: str) -> Path:
    """One folder per property for the whole session (a fresh one per example would grow the
    composition cache, which is keyed by the config folders)."""
    if name not in _FOLDERS:
        _FOLDERS[name] = factory.mktemp(name)
    return _FOLDERS[name]
