"""The per-role summary the main job prints: for every engine, each role's line shows the engine's summary
fields (the layout table's ``summary``) with the values of that role's own engine block."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import main_in_process
from omegaconf import OmegaConf

import verl_roles
from verl_roles.base import layout
from verl_roles.base.releases import engine_choice
from verl_roles.views.summary import summarize


def role_line(text: str, role: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith(f"  {role} ")]
    return line


def shown(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "-" if value is None else str(value)


@pytest.mark.parametrize("engine", layout.ENGINES)
def test_each_role_line_shows_its_engine_blocks_summary_fields(engine: str):
    row = layout.engine(engine)
    # Per-role values: the critic offloads (every engine block has param_offload, no topology key), the
    # baseline changes the first summary field for every role.
    first = row.summary[0][1]
    cfg = verl_roles.compose([
        *engine_choice(engine),
        # A KL term in the actor's loss: verl builds the reference policy, and its line is shown.
        f"{layout.ACTOR}.use_kl_loss=true",
        f"{layout.CRITIC}.{row.block('critic')}.param_offload=true",
        f"{row.baseline}.{first}=2",
    ])
    text = summarize(cfg)
    assert f"model_engine={engine}," in text.splitlines()[0]
    for role in (role.name for role in layout.ROLES if role.engine_block):
        block = OmegaConf.select(cfg, f"{layout.ROLE_SECTIONS[role]}.{row.block(role)}")
        line = role_line(text, role)
        assert f"{row.summary[0][0]}=2" in line, line
        for label, field in row.summary:
            assert f"{label}={shown(block[field])}" in line, (role, label, line)


@pytest.mark.parametrize("engine", layout.ENGINES)
def test_main_job_prints_the_summary_of_what_it_wrote(engine: str, tmp_path: Path, capsys):
    code, out, err = main_in_process([*engine_choice(engine)], tmp_path, capsys)
    assert code == 0, err
    written = OmegaConf.load(tmp_path / "out" / "resolved.yaml")
    assert summarize(written) in out
