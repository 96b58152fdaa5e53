"""`verl-roles launch` and the verl release it targets."""

from __future__ import annotations

import tomllib

from conftest import REPO

from verl_roles.verl_target import VERL_EXTRA, VERL_TARGET_VERSION


def test_the_verl_extra_pins_the_target_release():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"][VERL_EXTRA] == [f"verl=={VERL_TARGET_VERSION}"]
