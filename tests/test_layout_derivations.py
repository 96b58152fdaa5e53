"""A role or an engine is a row of the layout table: whatever follows from the rows is derived, not listed.

The test copies the package, adds two rows to the copy's layout table (a trained role with its own model
and engine blocks, not named in slime's files, and a second Megatron-Core engine) and checks, in a fresh
process, that every table built from the layout has them: the types of their keys, the value tables of
the rules, the deliberate differences from verl, the sequence-parallel step, the summary, the roles
table, the snapshots. A hand-kept list of roles or engines anywhere there fails it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, cli_env

# Inserted into the copy's verl_roles/base/layout.py: each line before the first line starting with its key.
EXTRA_ROWS = {
    "DEFAULT_ENGINE = ": (
        "from dataclasses import replace as _replace\n"
        "ENGINE_TABLE = (*ENGINE_TABLE, _replace(MEGATRON, name='probe_engine', baseline='probe_engine', "
        "role_block='probe_engine', title='Probe', aliases=()))\n"
    ),
    "ROLES_BY_NAME: ": (
        "ROLES = (*ROLES, Role('probe_role', 'probe_section', group='role/probe_role', "
        "model='probe_section.model', trained=True))\n"
    ),
}

PROBE = r"""
import json
from omegaconf import OmegaConf
from verl_roles.base import layout, releases
from verl_roles.upstream import own_types, verl_differences
from verl_roles.commands.snapshots import VARIANTS
from verl_roles.views.role_table import ROLE_COLUMNS
from verl_roles.validation.rules import tables
from verl_roles.validation.rules.values import fsdp_roles_in_use, shown_roles
from verl_roles.steps.sequence_parallel import megatron_role_blocks
from verl_roles.views.summary import summarize
from verl_roles.inputs.config_tree import CONF_DIR
from verl_roles.inputs.engine_options import engine_option_files

section = {"optim": {"lr": 3e-6}, "ppo_mini_batch_size": 8, "ppo_micro_batch_size_per_gpu": 2,
           "log_prob_micro_batch_size_per_gpu": 4, "enable": True}
def probed(key):
    return "probe_section" in key or "probe_engine" in key

cfg = OmegaConf.create({"model_engine": "probe_engine", "algorithm": {"adv_estimator": "gae"},
                        "trainer": {"nnodes": 1, "n_gpus_per_node": 8}, "data": {"train_batch_size": 16}})
for role in layout.ROLES:
    node = dict(section)
    if role.engine_block:
        node["probe_engine"] = {"tensor_model_parallel_size": 2, "sequence_parallel": True}
    else:
        node.update({key: 1 for _, key in role.summary})
    OmegaConf.update(cfg, role.section, node, force_add=True)
OmegaConf.update(cfg, "probe_section.model", {"path": None}, force_add=True)
required = [p.key for p in tables.required_paths_are_set(cfg)]
ranged = {row.key for row in tables.RANGES}
print(json.dumps({
    "own_types": sorted(key for key in own_types.OWN_TYPES if probed(key)),
    "router_replay": [key for key in tables.ROUTER_REPLAY_KEYS if probed(key)],
    "ranged": sorted(key for key in ranged if key.startswith("probe_section.")),
    "enums": [known.key for known in tables.ENUMS if known.key.startswith("probe_section.")],
    "required": required,
    "differences": [d.pattern for d in verl_differences.DIFFERENCES if "sequence_parallel" in d.pattern],
    "sp_blocks": megatron_role_blocks(cfg),
    "summary": summarize(cfg).splitlines(),
    "shown": [role.name for role in shown_roles(cfg)],
    "columns": list(ROLE_COLUMNS),
    "fsdp_roles": fsdp_roles_in_use(OmegaConf.merge(cfg, {"model_engine": "dp"})),
    "slime_roles": list(layout.SLIME_ROLES),
    "engine_option": engine_option_files(CONF_DIR)[CONF_DIR / "model_engine" / "probe_engine.yaml"],
    "snapshots": [v.filename for v in VARIANTS],
    "selectable": list(layout.SELECTABLE_GROUPS),
}))
"""


def probe_with_extra_rows(tmp_path: Path) -> dict:
    package = tmp_path / "verl_roles"
    shutil.copytree(REPO / "verl_roles", package, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "conf").symlink_to(REPO / "conf")  # the copy's verl_roles/conf -> ../conf, read only
    layout = package / "base" / "layout.py"
    lines = layout.read_text(encoding="utf-8").splitlines(keepends=True)
    for anchor, text in EXTRA_ROWS.items():
        at = next(i for i, line in enumerate(lines) if line.startswith(anchor))
        lines.insert(at, text)
    layout.write_text("".join(lines), encoding="utf-8")
    env = {**cli_env(), "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_a_role_and_an_engine_added_to_the_layout_reach_every_table(tmp_path: Path):
    found = probe_with_extra_rows(tmp_path)
    # Types: the new model's LoRA block, the new engine's baseline, each role's blocks under it.
    assert "probe_section.model.lora.rank" in found["own_types"]
    assert "probe_engine" in found["own_types"]
    assert "probe_section.fsdp_config.wrap_policy.min_num_params" in found["own_types"]
    assert "probe_section.probe_engine.override_transformer_config.recompute_method" in found["own_types"]
    assert "critic.probe_engine.override_transformer_config.recompute_method" in found["own_types"]
    # The rules' tables: router replay in every block, ranges and loss aggregation of a trained role, its
    # model path required while it trains.
    assert {"probe_section.megatron.router_replay.mode", "probe_section.probe_engine.router_replay.mode",
            "actor_rollout_ref.actor.probe_engine.router_replay.mode"} <= set(found["router_replay"])
    assert {"probe_section.optim.lr", "probe_section.ppo_mini_batch_size",
            "probe_section.probe_engine.tensor_model_parallel_size"} <= set(found["ranged"])
    assert found["enums"][:1] == ["probe_section.loss_agg_mode"]
    assert "probe_section.model.path" in found["required"]
    # A Megatron-Core engine: verl turns its sequence_parallel off at TP 1, in every role's block.
    assert {"probe_section.megatron.sequence_parallel", "critic.probe_engine.sequence_parallel"} <= set(
        found["differences"])
    assert "probe_section.probe_engine" in found["sp_blocks"]
    # What a user reads: the summary line, the roles table's column, an FSDP role, its option group.
    line = [line for line in found["summary"] if line.split()[0] == "probe_role"]
    assert line and "TP=2" in line[0] and "lr=3e-06" in line[0], found["summary"]
    assert "probe_role" in found["shown"] and "probe_role" in found["columns"]
    assert ["probe_role", "probe_section"] in found["fsdp_roles"]
    assert "role/probe_role" in found["selectable"]
    # Not a slime role unless its row says so; a snapshot of the new engine.
    assert "probe_role" not in found["slime_roles"]
    assert "_generated_ppo_probe_engine_trainer.yaml" in found["snapshots"]
    # The engine's option of the model_engine group, generated: its baseline, every role's block (the new
    # role's too), the new trained role's optimizer and LoRA block.
    option = found["engine_option"].splitlines()
    assert {
        "  - /engine/probe_engine@probe_engine", "  - /engine/probe_engine_role@probe_section.probe_engine",
        "  - /engine/probe_engine_role@critic.probe_engine", "  - /optim/megatron@probe_section.optim",
        "  - /lora/megatron@probe_section.model.lora", "model_engine: probe_engine",
    } <= set(option), option
