"""Our resolved config carries verl 0.9.1's whole config surface, and nothing verl's conversions reject.

Reads the frozen reference (tests/data/verl-0.9.1/, see tests/verl_reference.py); no verl needed.

- Coverage: every leaf of verl's composed ``ppo_trainer``, for each of its ``model_engine`` options, is in
  our resolved config (``verl_roles.compose``, what resolved.yaml holds) with verl's resolved value, or
  is in :data:`ALLOWED` with the reason. An entry that no longer matches a difference fails (stale).
- Conversions: every section verl converts to a dataclass (``omega_conf_to_dataclass``, with the
  preparation verl applies to the ref first) holds only fields of that dataclass, at every level where
  verl instantiates one (a ``_target_``, or a field declared as a dataclass).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

import pytest
import verl_reference as vr
from omegaconf import OmegaConf

import verl_roles
from verl_roles.layout import ENGINE_TABLE, HF_MODULE_NAMES, MEGATRON_MODULE_NAMES
from verl_roles.layout import ENGINES as OUR_ENGINES

# verl's engines that model_engine offers here too (every one of them: see the first test).
ENGINES = [engine for engine in vr.engines() if engine in OUR_ENGINES]
ALL = tuple(ENGINES)
# Engines by how verl reads LoRA (the layout table's LoRA naming family): the FSDP engine and VeOmni, built on
# it, read the flat keys; Megatron reads the block; TorchTitan reads neither.
FLAT_LORA_READERS = tuple(e.name for e in ENGINE_TABLE if e.lora_module_names == HF_MODULE_NAMES)
BLOCK_LORA_READERS = tuple(e.name for e in ENGINE_TABLE if e.lora_module_names == MEGATRON_MODULE_NAMES)
NO_LORA = tuple(e.name for e in ENGINE_TABLE if e.lora_module_names is None)
MODELS = ("actor_rollout_ref.model", "critic.model")


@dataclass(frozen=True)
class Allowed:
    """A verl leaf (fnmatch pattern) whose value or presence differs on purpose under ``engines``."""

    pattern: str
    engines: tuple[str, ...]
    reason: str


def _per_model(field: str, engines: tuple[str, ...], reason: str) -> list[Allowed]:
    return [Allowed(f"{model}.{field}", engines, reason) for model in MODELS]


# The one allow-list: every difference from verl 0.9.1's composed config, with its reason.
ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        "actor_rollout_ref.rollout.name", ALL,
        "verl leaves it mandatory (???); we default to vllm, the backend nearly every verl launch script "
        "sets, so a run without it composes",
    ),
    Allowed(
        "reward.reward_model.rollout.name", ALL,
        "follows actor_rollout_ref.rollout.name (verl: mandatory ???), so the reward model is served by "
        "the policy's backend unless set",
    ),
    Allowed(
        "distillation.teacher_models.teacher_model.inference.name", ALL,
        "follows actor_rollout_ref.rollout.name; verl's oc.select of its mandatory name resolves to null",
    ),
    *_per_model(
        "lora.alpha", FLAT_LORA_READERS,
        "the block is our one LoRA source; under FSDP-style engines it carries the alpha verl's engine "
        "reads from the flat lora_alpha (16), so both names agree (verl's block default 32 is unread there)",
    ),
    *_per_model(
        "lora.target_modules", FLAT_LORA_READERS,
        "the block is our one LoRA source; under FSDP-style engines it carries the modules verl's engine "
        "reads from the flat target_modules (all-linear, Hugging Face names), not Megatron's names",
    ),
    *_per_model(
        "lora.alpha", NO_LORA,
        "verl's TorchTitan engine reads no LoRA setting (a non-zero rank is refused here); the block keeps "
        "the Hugging Face defaults, so the flat lora_alpha derived from it is verl's flat default (16)",
    ),
    *_per_model(
        "lora.target_modules", NO_LORA,
        "verl's TorchTitan engine reads no LoRA setting (a non-zero rank is refused here); the block keeps "
        "the Hugging Face defaults, so the flat target_modules derived from it is verl's (all-linear)",
    ),
    *_per_model(
        "lora_alpha", BLOCK_LORA_READERS,
        "derived from the block, which verl's Megatron engine reads (alpha 32): one alpha under both names "
        "(verl's unread flat default is 16)",
    ),
    *_per_model(
        "use_remove_padding", ("megatron",),
        "kept from the legacy megatron trainer on purpose (false); Megatron packs through "
        "megatron.use_remove_padding, which follows verl",
    ),
    *(
        Allowed(
            f"{section}.megatron.sequence_parallel", ("megatron",),
            "written as verl uses it: its McoreEngineConfig turns sequence_parallel off at "
            "tensor_model_parallel_size 1 (verl's default), while its YAML shows true",
        )
        for section in ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")
    ),
    *_per_model(
        "override_config", ("megatron",),
        "kept from the legacy megatron trainer on purpose: model_config and moe_config.freeze_moe_router "
        "exist, so old command lines set them without `+`",
    ),
)


def test_every_verl_engine_is_an_option_of_model_engine():
    """The surface is checked for each engine verl ships: none may be left out of this file's tests."""
    assert set(vr.engines()) <= set(OUR_ENGINES), set(vr.engines()) - set(OUR_ENGINES)
    assert all(set(entry.engines) <= set(ENGINES) for entry in ALLOWED)


def allowed_for(engine: str) -> list[Allowed]:
    return [entry for entry in ALLOWED if engine in entry.engines]


def _get(tree: Any, path: str) -> Any:
    node = tree
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(path)
        node = node[part]
    return node


def _same(ours: Any, verl: Any) -> bool:
    """Equal values of the same kind (true is not 1; 1 and 1.0 are the same number)."""
    if isinstance(ours, bool) or isinstance(verl, bool):
        return type(ours) is type(verl) and ours == verl
    if isinstance(ours, dict) and isinstance(verl, dict):
        return ours.keys() == verl.keys() and all(_same(ours[k], verl[k]) for k in ours)
    if isinstance(ours, list) and isinstance(verl, list):
        return len(ours) == len(verl) and all(_same(a, b) for a, b in zip(ours, verl, strict=True))
    return ours == verl and isinstance(ours, int | float) == isinstance(verl, int | float)


@pytest.fixture(scope="module")
def resolved() -> dict[str, dict]:
    return {
        engine: OmegaConf.to_container(verl_roles.compose([f"model_engine={engine}"]))
        for engine in ENGINES
    }


def compare(engine: str, ours: dict) -> dict[str, list[str]]:
    """verl's leaves of ``engine`` sorted into same / different / missing, as ``path: detail`` lines."""
    found: dict[str, list[str]] = {"same": [], "different": [], "missing": []}
    for path, leaf in vr.leaves(engine).items():
        try:
            value = _get(ours, path)
        except KeyError:
            found["missing"].append(path)
            continue
        if "resolved" in leaf and _same(value, leaf["resolved"]):
            found["same"].append(path)
        else:
            verl = leaf.get("resolved", f"unresolved ({leaf.get('raw')!r})")
            found["different"].append(f"{path}: verl {verl!r}, ours {value!r}")
    return found


def coverage_report(engine: str, found: dict[str, list[str]]) -> str:
    entries = allowed_for(engine)
    listed = [line for kind in ("different", "missing") for line in found[kind]
              if any(fnmatch.fnmatchcase(line.split(":")[0], e.pattern) for e in entries)]
    total = sum(len(lines) for lines in found.values())
    return (
        f"{engine}: {total} verl leaves: {len(found['same'])} present with verl's value, "
        f"{len(found['different'])} with another value, {len(found['missing'])} missing; "
        f"{len(listed)} of the differences allow-listed"
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_every_verl_leaf_is_present_with_verls_value_or_allow_listed(engine, resolved):
    found = compare(engine, resolved[engine])
    entries = allowed_for(engine)
    unexplained = [
        f"{kind}: {line}"
        for kind in ("different", "missing")
        for line in found[kind]
        if not any(fnmatch.fnmatchcase(line.split(":")[0], e.pattern) for e in entries)
    ]
    assert not unexplained, coverage_report(engine, found) + "\n" + "\n".join(unexplained)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_allow_list_entry_is_stale(engine, resolved):
    found = compare(engine, resolved[engine])
    differing = [line.split(":")[0] for kind in ("different", "missing") for line in found[kind]]
    stale = [
        entry.pattern
        for entry in allowed_for(engine)
        if not any(fnmatch.fnmatchcase(path, entry.pattern) for path in differing)
    ]
    assert not stale, f"{engine}: allow-list entries that no longer match a difference (drop them): {stale}"


# --------------------------------------------------------------------------- conversions


def _class_of_target(target: str) -> str:
    return vr.load("types.json")["targets"][target]


def _fields(class_name: str) -> dict[str, Any]:
    return vr.load("types.json")["dataclasses"][class_name]["fields"]


def _dataclass_ref(descriptor: Any) -> str | None:
    """The dataclass a field declares (through Optional), or None."""
    if isinstance(descriptor, dict):
        if descriptor.get("kind") == "dataclass":
            return descriptor["ref"]
        if descriptor.get("kind") == "optional":
            return _dataclass_ref(descriptor["of"])
    return None


def _dict_value_ref(descriptor: Any) -> str | None:
    """For a ``dict[str, <dataclass>]`` field, the dataclass of its values."""
    if isinstance(descriptor, dict) and descriptor.get("kind") == "dict":
        return _dataclass_ref(descriptor["value"])
    return None


def foreign_keys(node: dict, class_name: str | None, path: str) -> list[str]:
    """Keys under ``node`` that verl's conversion would reject: not a field of the class it builds.

    verl instantiates every mapping with a ``_target_`` (at any depth) and builds a field declared as a
    dataclass from its mapping; a mapping under a field of any other type is searched for ``_target_``.
    """
    if "_target_" in node:
        class_name = _class_of_target(node["_target_"])
    fields = _fields(class_name) if class_name is not None else None
    problems = []
    for key, child in node.items():
        declared = None
        if fields is not None:
            if key not in fields:
                problems.append(f"{path}.{key} (not a field of {class_name})")
                continue
            declared = fields[key]["type"]
        if not isinstance(child, dict):
            continue
        value_ref = _dict_value_ref(declared)
        if value_ref is not None:
            for name, entry in child.items():
                if isinstance(entry, dict):
                    problems += foreign_keys(entry, value_ref, f"{path}.{key}.{name}")
        else:
            problems += foreign_keys(child, _dataclass_ref(declared), f"{path}.{key}")
    return problems


def prepared(section: str, node: dict, ours: dict) -> dict:
    """``node`` after the preparation verl applies before converting ``section`` (the ref's)."""
    steps = vr.load("conversions.json")["sections"][section].get("preparation", {}).get("steps", [])
    node = dict(node)
    for step in steps:
        if "copied_from" in step:
            node[step["set"]] = _get(ours, step["copied_from"])
        elif step.get("removes_it"):
            node[step["set"]] = node.pop(step["from_ref_key"], step["default"])
        else:
            node[step["set"]] = node.get(step["from_ref_key"], step["default"])
    return node


def converted_sections(engine: str, ours: dict) -> list[tuple[str, dict, str | None]]:
    """(path, node, dataclass) of every section verl converts that our config has."""
    out = []
    for section, info in vr.load("conversions.json")["sections"].items():
        declared = info.get("dataclass_type")
        parent, _, last = section.rpartition(".")
        if last == "*":
            nodes = {f"{parent}.{name}": child for name, child in _get(ours, parent).items()}
        else:
            try:
                nodes = {section: _get(ours, section)}
            except KeyError:
                continue
        for path, node in nodes.items():
            if isinstance(node, dict):
                out.append((path, prepared(section, node, ours), declared))
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_converted_sections_hold_only_fields_of_verls_dataclasses(engine, resolved):
    ours = resolved[engine]
    sections = converted_sections(engine, ours)
    assert {"actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic", "actor_rollout_ref.rollout"} <= {
        path for path, _, _ in sections
    }
    problems = sorted({p for path, node, declared in sections for p in foreign_keys(node, declared, path)})
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_converted_section_carries_verls_target(engine, resolved):
    """verl converts these sections through their `_target_`: each must name the class verl uses."""
    wrong = []
    for section, info in vr.load("conversions.json")["sections"].items():
        target = info.get("target_per_engine", {}).get(engine)
        if target is None:
            continue
        try:
            ours = _get(resolved[engine], f"{section}._target_")
        except KeyError:
            ours = None
        if ours != target:
            wrong.append(f"{section}._target_: verl {target!r}, ours {ours!r}")
    assert not wrong, "\n".join(wrong)
