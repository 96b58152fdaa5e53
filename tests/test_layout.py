"""The one layout table (verl_roles/base/layout.py) and the config tree agree: every engine of the
model_engine group has its row, and every name a row gives exists where the row says."""

from __future__ import annotations

import pytest
from conftest import CONF, group_options
from omegaconf import DictConfig, OmegaConf

import verl_roles
from verl_roles.base import layout
from verl_roles.base.releases import engine_choice


def test_every_model_engine_option_is_an_engine_or_an_alias():
    assert set(group_options(layout.ENGINE_KEY)) == {*layout.ENGINES, *layout.ENGINE_ALIASES}
    assert layout.DEFAULT_ENGINE == "dp"
    assert all(layout.engine(alias).name == name for alias, name in layout.ENGINE_ALIASES.items())


@pytest.mark.parametrize("row", layout.ENGINE_TABLE, ids=lambda row: row.name)
def test_each_engine_row_names_what_its_composition_has(row: layout.Engine):
    cfg = verl_roles.compose([*engine_choice(row.name)])
    assert cfg[layout.ENGINE_KEY] == row.name
    assert isinstance(OmegaConf.select(cfg, row.baseline), DictConfig), row.baseline
    for role in layout.ROLES:
        block = OmegaConf.select(cfg, f"{role.section}.{row.block(role.name)}")
        assert isinstance(block, DictConfig) == role.engine_block, (role.name, row.block(role.name))
        if role.engine_block:
            assert {key for _, key in row.summary} <= set(block), role.name
            assert set(row.topology) <= set(block), role.name
    for role in layout.ROLES:
        for _, key in row.model_parallel_keys(role.name) if role.engine_block else ():
            assert OmegaConf.select(cfg, f"{role.section}.{key}", default=KeyError) is not KeyError, key
    assert set(row.unset_follows) <= set(row.topology)
    for name in (row.baseline_file, row.optimizer_file):
        assert (CONF / name).is_file(), name


def test_each_role_row_names_its_section_group_and_model():
    cfg = verl_roles.compose()
    for role in layout.ROLES:
        assert isinstance(OmegaConf.select(cfg, role.section), DictConfig), role.section
        if role.group is not None:
            assert "default" in group_options(role.group), role.group
        if role.model is not None:
            assert isinstance(OmegaConf.select(cfg, f"{role.model}.{layout.LORA_BLOCK}"), DictConfig)
            assert isinstance(OmegaConf.select(cfg, f"{role.section}.{layout.OPTIM_BLOCK}"), DictConfig)
    assert set(layout.SLIME_ROLES) <= set(layout.ROLE_GROUPS)
