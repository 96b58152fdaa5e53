"""Megatron's sequence_parallel as verl 0.9.1 uses it: off wherever the tensor parallel size is 1.

Through the public interface: ``verl_roles.compose``, ``verl-roles explain`` and the files the main job
writes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml
from conftest import run_in_process
from omegaconf import OmegaConf

import verl_roles
from verl_roles.commands import explain

MEGATRON = "model_engine=megatron"
BLOCKS = ("actor_rollout_ref.actor.megatron", "actor_rollout_ref.ref.megatron", "critic.megatron")


def compose(*overrides: str) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = verl_roles.compose([MEGATRON, *overrides])
    return cfg, [str(w.message) for w in caught if "sequence_parallel" in str(w.message)]


def sequence_parallel(cfg) -> dict[str, bool]:
    return {block: OmegaConf.select(cfg, f"{block}.sequence_parallel") for block in ("megatron", *BLOCKS)}


def test_the_default_run_writes_it_off_at_tensor_parallel_size_one_without_a_warning():
    cfg, warned = compose()
    assert set(sequence_parallel(cfg).values()) == {False}
    assert warned == []


def test_it_stays_on_where_the_tensor_parallel_size_is_above_one():
    cfg, warned = compose("megatron.tensor_model_parallel_size=2")
    assert set(sequence_parallel(cfg).values()) == {True}
    assert warned == []


def test_each_role_block_gets_the_value_of_its_own_tensor_parallel_size():
    cfg, _ = compose(
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
        "critic.megatron.tensor_model_parallel_size=2",
        "actor_rollout_ref.ref.megatron.tensor_model_parallel_size=1",
    )
    assert sequence_parallel(cfg) == {
        "megatron": False,
        "actor_rollout_ref.actor.megatron": True,
        "actor_rollout_ref.ref.megatron": False,
        "critic.megatron": True,
    }


@pytest.mark.parametrize("key", ["megatron.sequence_parallel", "critic.megatron.sequence_parallel"])
def test_asking_for_it_on_the_command_line_at_tensor_parallel_size_one_warns(key):
    cfg, warned = compose(f"{key}=true")
    assert OmegaConf.select(cfg, key) is False
    (message,) = warned
    assert message.startswith(f"{key}=true has no effect on ")
    assert "verl turns sequence_parallel off at tensor_model_parallel_size 1" in message


def test_explain_names_the_step_and_the_tensor_parallel_size():
    out = explain.explain("critic.megatron.sequence_parallel", [MEGATRON]).render()
    assert out.startswith("critic.megatron.sequence_parallel = false")
    assert (
        "verl turns sequence_parallel off at tensor_model_parallel_size 1 (McoreEngineConfig); "
        "critic.megatron.tensor_model_parallel_size is 1: false"
    ) in out


def test_the_files_written_show_the_value_verl_uses(tmp_path: Path):
    result = run_in_process([MEGATRON, f"hydra.run.dir={tmp_path}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load((tmp_path / "resolved.yaml").read_text(encoding="utf-8"))
    assert resolved["critic"]["megatron"]["sequence_parallel"] is False
    actor = yaml.safe_load((tmp_path / "roles" / "actor.yaml").read_text(encoding="utf-8"))
    assert actor["megatron"]["sequence_parallel"] is False
    assert "SP=off" in result.stdout
