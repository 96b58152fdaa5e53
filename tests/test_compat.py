"""The compatibility seam (verl_roles/compat/): every entry names its kind, the public behaviour it stands
for and a guard test that exists; the version flags say which stack is installed."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import hydra
import omegaconf
import pytest
from conftest import REPO

from verl_roles.compat import HYDRA_1_4, KINDS, OMEGACONF_2_4, Borrowed, messages
from verl_roles.compat import hydra as hydra_compat
from verl_roles.compat import omegaconf as omegaconf_compat

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

ENTRIES: list[Borrowed] = [
    *hydra_compat.BORROWED, *omegaconf_compat.BORROWED, *messages.BORROWED,
]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: f"{e.kind}-{e.uses[:60]}")
def test_every_entry_says_what_it_stands_for_and_has_a_guard(entry: Borrowed):
    assert entry.kind in KINDS
    assert entry.uses.strip() and entry.public.strip()
    path, _, test = entry.guard.partition("::")
    assert (REPO / path).is_file(), f"{entry.uses}: its guard {path} does not exist"
    if test:
        source = (REPO / path).read_text(encoding="utf-8")
        found = re.search(rf"^def {re.escape(test)}\(", source, re.M)
        assert found, f"{entry.uses}: no test {test} in {path}"
    # The guard runs on both stacks: CI's second stack runs the tests marked `stack` (docs/testing.md).
    guard = importlib.import_module(Path(path).stem)
    marks = getattr(guard, "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    assert any(mark.name == "stack" for mark in marks), f"{path} guards {entry.uses} but is not marked stack"


def test_every_pattern_of_library_text_is_an_entry():
    patterns = [name for name, value in vars(messages).items() if isinstance(value, re.Pattern)]
    assert len(patterns) == len([e for e in messages.BORROWED if e.kind == "TEXT"]) - 1  # + the key suffix


def test_the_flags_name_the_installed_stack():
    assert hydra.__version__.startswith("1.4") == HYDRA_1_4
    assert omegaconf.__version__.startswith("2.4") == OMEGACONF_2_4
    # Hydra 1.4 requires OmegaConf 2.4 and Hydra 1.3 refuses it: one flag would do, both are kept for readers.
    assert HYDRA_1_4 == OMEGACONF_2_4


def test_the_version_base_is_put_back():
    """``current_version_base`` leaves the caller's setting as it found it, on either stack."""
    from hydra.version import getbase

    before = getbase()
    with hydra_compat.current_version_base():
        pass
    assert getbase() == before
