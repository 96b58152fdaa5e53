"""The files a run writes are exactly ``OmegaConf.to_yaml`` of the resolved config (written with
PyYAML's C emitter for speed, which must not change a byte)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

import verl_roles
from verl_roles.runs.run_files import ROLE_SECTIONS, run_files, to_yaml

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

TRICKY_VALUES = {
    "bool_like": ["true", "False", "yes", "off", "null", "~"],
    "number_like": ["123", "1e-5", "0x1f", ".inf", "010", "1_000"],
    "text": ["a: b # c", "- item", "'quoted'", 'say "hi"', "héllo wörld ✓", "x" * 150, "two\nlines"],
    "spaces": [" padded ", "tab\there", ""],
    "numbers": [0, -1, 3.5, 1e-6, 1e20, float("inf")],
    "empty": {"dict": {}, "list": [], "none": None, "string": ""},
    "nested": [{"a": [1, {"b": None}]}, [[]]],
}


@pytest.mark.parametrize("overrides", [[], ["model_engine=megatron", "critic.optim.lr=2e-5"]])
def test_run_files_equal_omegaconf_to_yaml(overrides):
    resolved = verl_roles.compose(overrides)
    files = run_files(resolved)
    assert files["resolved.yaml"] == OmegaConf.to_yaml(resolved, resolve=True)
    for role, section in ROLE_SECTIONS.items():
        assert files[f"roles/{role}.yaml"] == OmegaConf.to_yaml(OmegaConf.select(resolved, section))


def test_tricky_values_are_written_as_omegaconf_writes_them():
    cfg = OmegaConf.create(TRICKY_VALUES)
    text = to_yaml(cfg)
    assert text == OmegaConf.to_yaml(cfg, resolve=True)
    assert OmegaConf.to_container(OmegaConf.create(text)) == OmegaConf.to_container(cfg)
