"""The frozen verl reference (tests/data/verl-<version>/) is complete and self-consistent.

No verl needed: these tests read the files scripts/freeze_verl_reference.py wrote, and run that
script only where it must refuse (no verl in this interpreter).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, cli_env
from verl_reference import RELEASES, VERL_VERSION, declared_type, engines, leaves, load, reference_dir

from verl_roles.base import layout

SCRIPT = REPO / "scripts" / "freeze_verl_reference.py"
EXAMPLES = REPO / "tests" / "data" / "verl_examples"
# Every corpus source (a folder with its MANIFEST); the frozen meta.json of a release names the same.
SOURCES = sorted(path.parent.name for path in EXAMPLES.glob("*/MANIFEST"))
# verl's engines that verl_roles has (each is one row of the layout table).
VERL_ENGINES = list(layout.ENGINES)
SHA256 = re.compile(r"[0-9a-f]{64}")
SCALAR_TYPES = {"int", "float", "str", "bool", "bytes", "any", "none"}


def freeze_script() -> Any:
    """The freeze script as a module (it imports only the standard library at module level)."""
    spec = importlib.util.spec_from_file_location("freeze_verl_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_files() -> list[str]:
    root = reference_dir()
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.json"))


def test_meta_names_the_release_tools_and_every_file():
    meta = load("meta.json")
    assert meta["verl_version"] == VERL_VERSION == reference_dir().name.removeprefix("verl-")
    assert re.fullmatch(r"1\.3\.\d+", meta["hydra_version"])
    assert re.fullmatch(r"2\.3\.\d+", meta["omegaconf_version"])
    assert meta["engines"] == VERL_ENGINES
    assert meta["files"] == reference_files()
    assert {f"composition/{e}.json" for e in VERL_ENGINES} | {
        "types.json",
        "conversions.json",
        "enums.json",
    } <= set(meta["files"])


def test_every_source_a_fact_came_from_has_a_sha256():
    meta = load("meta.json")
    hashes = meta["sources_sha256"]
    assert all(SHA256.fullmatch(h) for h in hashes.values())
    tree = meta["config_tree"]
    assert f"{tree}/{meta['primary_config']}.yaml" in hashes
    for engine in VERL_ENGINES:
        assert f"{tree}/{meta['engine_group']}/{engine}.yaml" in hashes
    for name, dataclass in load("types.json")["dataclasses"].items():
        assert dataclass["source"] in hashes, name
    for call in load("conversions.json")["calls"]:
        assert call["file"] in hashes, call
    assert load("conversions.json")["sections"]["actor_rollout_ref.ref"]["preparation"]["file"] in hashes


@pytest.mark.parametrize("name", reference_files())
def test_files_are_in_the_one_canonical_formatting(name):
    """What the script writes is exactly what its formatter gives for the same content (so a re-run
    that finds the same facts writes the same bytes)."""
    script = freeze_script()
    text = (reference_dir() / name).read_text(encoding="utf-8")
    assert text == script.dump(json.loads(text), script.inline_depth_of(name))


@pytest.mark.parametrize("engine", VERL_ENGINES)
def test_composition_leaves_are_well_formed(engine):
    composition = load(f"composition/{engine}.json")
    assert composition["engine"] == engine
    assert composition["overrides"] == [f"model_engine={engine}"]
    found = leaves(engine)
    assert composition["leaf_count"] == len(found) > 800
    for path, leaf in found.items():
        assert "raw" in leaf, path
        assert ("resolved" in leaf) != ("unresolved" in leaf), path
        if "unresolved" in leaf:
            assert re.match(r"\w+: ", leaf["unresolved"]), (path, leaf)
    assert found["model_engine"]["resolved"] == engine
    # Interpolations are kept raw and resolved separately.
    interpolated = [leaf for leaf in found.values() if isinstance(leaf["raw"], str) and "${" in leaf["raw"]]
    assert len(interpolated) > 50
    assert any(leaf["resolved"] != leaf["raw"] for leaf in interpolated if "resolved" in leaf)
    # The one mandatory value of verl's default composition does not resolve, and says why.
    assert found["actor_rollout_ref.rollout.name"]["raw"] == "???"
    assert found["actor_rollout_ref.rollout.name"]["unresolved"].startswith("MissingMandatoryValue")


@pytest.mark.parametrize("engine", VERL_ENGINES)
def test_targets_and_declared_types_point_into_types_json(engine):
    types = load("types.json")
    composition = load(f"composition/{engine}.json")
    found = composition["leaves"]
    for section, target in composition["targets"].items():
        prefix = f"{section}." if section else ""
        assert found[f"{prefix}_target_"]["raw"] == target
        assert types["targets"][target] in types["dataclasses"], target
    typed = 0
    for path, leaf in found.items():
        declared = leaf.get("declared")
        if declared is None:
            continue
        if "target_of" in declared:
            assert path.endswith("._target_") and declared["target_of"] in types["dataclasses"]
        elif "not_a_field_of" in declared:
            assert path.rsplit(".", 1)[-1] not in types["dataclasses"][declared["not_a_field_of"]]["fields"]
        else:
            assert declared["field"] in types["dataclasses"][declared["class"]]["fields"], path
            assert_descriptor(declared_type(leaf), types["dataclasses"])
            typed += 1
    assert typed > 600
    converted = tuple(f"{s}." for s in load("conversions.json")["sections"] if "*" not in s)
    undeclared = [p for p, leaf in found.items() if p.startswith(converted) and "declared" not in leaf]
    assert undeclared == []


def test_engine_sections_become_the_engines_dataclasses():
    strategy = {"dp": "fsdp", "megatron": "megatron", "torchtitan": "torchtitan", "veomni": "veomni"}
    classes = set()
    for engine in engines():
        found = leaves(engine)
        assert found["actor_rollout_ref.actor.strategy"]["resolved"] == strategy[engine]
        target = load(f"composition/{engine}.json")["targets"]["actor_rollout_ref.actor"]
        classes.add(load("types.json")["targets"][target])
    assert len(classes) == len(VERL_ENGINES), classes
    assert any(p.startswith("actor_rollout_ref.actor.megatron.") for p in leaves("megatron"))
    assert not any(p.startswith("actor_rollout_ref.actor.megatron.") for p in leaves("dp"))
    assert any(p.startswith("actor_rollout_ref.actor.fsdp_config.") for p in leaves("dp"))


def test_every_type_descriptor_is_well_formed_and_every_dataclass_ref_exists():
    dataclasses = load("types.json")["dataclasses"]
    assert len(dataclasses) > 40
    for name, dataclass in dataclasses.items():
        assert set(dataclass["bases"]) <= set(dataclasses), name
        for field_name, field in dataclass["fields"].items():
            assert isinstance(field["has_default"], bool), (name, field_name)
            assert_descriptor(field["type"], dataclasses)
            if "default_factory" in field and isinstance(field["default_factory"], dict):
                assert_descriptor(field["default_factory"], dataclasses)
    actor = dataclasses["verl.workers.config.actor.ActorConfig"]["fields"]
    assert actor["ppo_micro_batch_size_per_gpu"]["type"] == {"kind": "optional", "of": "int"}
    assert actor["ppo_mini_batch_size"] == {"default": 256, "has_default": True, "type": "int"}
    assert actor["strategy"]["has_default"] is False  # OmegaConf's mandatory "???"


def assert_descriptor(descriptor: Any, dataclasses: dict[str, Any]) -> None:
    if isinstance(descriptor, str):
        assert descriptor in SCALAR_TYPES, descriptor
        return
    kind = descriptor["kind"]
    if kind in ("optional", "list", "set"):
        assert_descriptor(descriptor["of"], dataclasses)
    elif kind in ("union", "tuple"):
        assert descriptor["of"]
        for member in descriptor["of"]:
            assert_descriptor(member, dataclasses)
    elif kind == "dict":
        assert_descriptor(descriptor["key"], dataclasses)
        assert_descriptor(descriptor["value"], dataclasses)
    elif kind in ("literal", "enum"):
        assert descriptor["values"]
    elif kind == "dataclass":
        assert descriptor["ref"] in dataclasses, descriptor
    else:
        assert kind in ("class", "unresolved"), descriptor


def test_every_conversion_call_is_mapped_to_a_section():
    conversions = load("conversions.json")
    assert conversions["scanned"]["python_files"] > 100
    calls = conversions["calls"]
    assert not [c for c in calls if c["note"].startswith("UNMAPPED")]
    sections = conversions["sections"]
    for required in (
        "actor_rollout_ref.actor",
        "actor_rollout_ref.ref",
        "actor_rollout_ref.rollout",
        "actor_rollout_ref.rollout.checkpoint_engine",
        "actor_rollout_ref.model",
        "critic",
        "distillation",
    ):
        assert sections[required]["converted_at"], required
        assert all(re.fullmatch(r"verl/[\w/]+\.py:\d+", site) for site in sections[required]["converted_at"])
    for call in calls:
        if call["section"] is not None:
            assert f"{call['file']}:{call['line']}" in sections[call["section"]]["converted_at"]
    actor_targets = sections["actor_rollout_ref.actor"]["target_per_engine"]
    assert sorted(actor_targets) == VERL_ENGINES and all(actor_targets.values())
    assert "critic.model" in sections["critic"]["nested_targets"]["dp"]


def test_ref_preparation_renames_the_log_prob_keys_before_conversion():
    preparation = load("conversions.json")["sections"]["actor_rollout_ref.ref"]["preparation"]
    renames = {s["from_ref_key"]: s["set"] for s in preparation["steps"] if "from_ref_key" in s}
    assert renames["log_prob_micro_batch_size_per_gpu"] == "ppo_micro_batch_size_per_gpu"
    assert renames["log_prob_use_dynamic_bsz"] == "use_dynamic_bsz"
    copies = {s["set"]: s["copied_from"] for s in preparation["steps"] if "copied_from" in s}
    assert copies == {"ppo_mini_batch_size": "actor_rollout_ref.actor.ppo_mini_batch_size"}
    assert all(s["line"] < preparation["converted_at_line"] for s in preparation["steps"])
    for engine in VERL_ENGINES:
        leaf = leaves(engine)["actor_rollout_ref.ref.log_prob_use_dynamic_bsz"]
        assert leaf["declared"]["field"] == "use_dynamic_bsz"
        assert leaf["declared"]["prepared_from"] == "log_prob_use_dynamic_bsz"


def test_enums_list_verls_names_with_their_origin():
    enums = load("enums.json")
    for name in ("adv_estimator", "policy_loss_mode", "reward_manager", "loss_agg_mode"):
        assert enums[name]["values"], name
        assert enums[name]["source"], name
    assert {"gae", "grpo", "gdpo", "optimal_token_baseline"} <= set(enums["adv_estimator"]["values"])
    assert set(enums["adv_estimator_enum"]["values"]) <= set(enums["adv_estimator"]["values"])
    assert "vanilla" in enums["policy_loss_mode"]["values"]
    assert "naive" in enums["reward_manager"]["values"]
    assert {"token-mean", "token-sum"} <= set(enums["loss_agg_mode"]["values"])


def test_compare_reports_surface_changes_and_keeps_moved_lines_as_notes():
    script = freeze_script()
    frozen = {name: load(name) for name in ("composition/dp.json", "enums.json", "conversions.json")}
    installed = json.loads(json.dumps(frozen))
    assert script.compare(frozen, installed) == ([], [])
    installed["composition/dp.json"]["leaves"]["trainer.total_epochs"]["resolved"] = 3
    installed["enums.json"]["adv_estimator"]["values"].append("my_estimator")
    installed["conversions.json"]["calls"][0]["line"] += 7
    differences, notes = script.compare(frozen, installed)
    assert len(differences) == 2, differences
    assert any("trainer.total_epochs" in d and "-> 3" in d for d in differences)
    assert any("added adv_estimator / values / my_estimator" in d for d in differences)
    assert len(notes) == 1 and "line" in notes[0]


def test_freeze_refuses_clearly_without_verl(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--out-dir", str(tmp_path / "ref")],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "error: verl is not importable" not in result.stderr:
        pytest.skip("verl is importable in this interpreter")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    # The newest release frozen here, whichever it is (adding one must not touch this test).
    assert f"pip install verl=={RELEASES[-1]}" in result.stderr
    assert not (tmp_path / "ref").exists()


def corpus(source: str) -> dict[str, list[str]]:
    """Launch name -> its lines (header included) for one corpus source."""
    return {
        p.stem: p.read_text(encoding="utf-8").splitlines() for p in sorted((EXAMPLES / source).glob("*.txt"))
    }


@pytest.mark.parametrize("source", SOURCES)
def test_examples_corpus_files_are_headed_override_lists(source):
    launches = corpus(source)
    manifest = (EXAMPLES / source / "MANIFEST").read_text(encoding="utf-8")
    assert f"launches recorded: {len(launches)}" in manifest
    assert len(launches) > 100
    for name, lines in launches.items():
        header = [line for line in lines if line.startswith("#")]
        overrides = lines[len(header) :]
        assert header and lines[: len(header)] == header, name
        assert re.match(
            r"# Overrides of verl's \S+\.sh \(" + source + r" snapshot [0-9a-f]{12}\)", header[0]
        ), name
        assert re.search(r"stand-ins: (\S+, )*HOME=/home/user[,.]", " ".join(header)), name
        assert overrides and all(line.strip() == line and line for line in overrides), name
        assert f"-> {name}.txt" in manifest or f", {name}.txt" in manifest, name


def test_examples_corpus_covers_the_engines_and_features_verl_ships():
    text = "\n".join(line for source in SOURCES for lines in corpus(source).values() for line in lines)
    for needle in (
        "model_engine=megatron",
        "model_engine=veomni",
        "model_engine=torchtitan",
        "algorithm.adv_estimator=grpo",
        "algorithm.adv_estimator=gae",
        "lora_rank=",
        "reward_model.",
        "reward.",
        "distillation.enabled=True",
        "--config-name=ppo_megatron_trainer.yaml",
    ):
        assert needle in text, needle


def test_examples_verdicts_match_the_corpus_one_to_one():
    frozen = load("examples_verdicts.json")
    assert sorted(frozen["verdicts"]) == SOURCES
    assert sorted(load("meta.json")["corpus"]["sources"]) == SOURCES
    for source in SOURCES:
        verdicts = frozen["verdicts"][source]
        assert sorted(verdicts) == sorted(corpus(source)), source
        summary = frozen["summary"][source]
        assert summary["examples"] == len(verdicts)
        assert summary["composed_by_verl"] == sum(v["composes"] for v in verdicts.values())
        assert summary["validated_by_verl"] == sum(bool(v.get("validates")) for v in verdicts.values())
        for name, verdict in verdicts.items():
            if verdict["composes"]:
                assert verdict["model_engine"] in VERL_ENGINES and isinstance(verdict["validates"], bool), (
                    name
                )
            else:
                assert re.match(r"\w+: \S", verdict["error"]) and "resolves" not in verdict, name
    assert frozen["verdicts"]["verl-project"]["examples__ppo_trainer__run_qwen3_8b_fsdp"]["composes"] is True
