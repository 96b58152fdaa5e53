"""The typed schema follows verl 0.9.1's declarations and the YAML; wrong types are caught at compose time.

The schema is verl's declared types (verl_roles/verl_reference.json, generated from the frozen reference
in tests/data/verl-0.9.1/) plus our table (verl_roles/own_types.py) for keys verl does not type.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
from conftest import REPO
from omegaconf import DictConfig, OmegaConf
from verl_reference import declared_type, engines, leaves

import verl_roles
from verl_roles import schema
from verl_roles.api import compose_raw
from verl_roles.layout import ENGINES
from verl_roles.own_types import OWN_TYPES, READ_WHEN_ADDED

GENERATOR = REPO / "scripts" / "generate_verl_schema.py"


def generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_verl_schema", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def yaml_paths(cfg: DictConfig) -> dict[str, object]:
    """Every key path of the composed YAML (sections and leaves) -> its unresolved value."""
    out: dict[str, object] = {}

    def walk(node: object, prefix: str) -> None:
        for key, child in node.items():
            path = f"{prefix}{key}"
            out[path] = child
            if isinstance(child, dict) and child:
                walk(child, path + ".")

    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return out


@pytest.fixture(scope="module", params=ENGINES)
def engine_yaml(request: pytest.FixtureRequest) -> tuple[str, dict[str, object]]:
    engine = request.param
    return engine, yaml_paths(compose_raw("ppo_trainer", [f"model_engine={engine}"]))


def covered(path: str, declared: dict[str, schema.KeyType]) -> bool:
    """A key is typed itself, or sits below a key typed as an open mapping (``dict`` / ``Any``)."""
    if path in declared:
        return True
    parts = path.split(".")
    return any(
        (ancestor := ".".join(parts[:i])) in declared
        and declared[ancestor].text in ("Any", "dict")
        for i in range(1, len(parts))
    )


def test_every_yaml_key_has_a_type(engine_yaml):
    engine, paths = engine_yaml
    declared = schema.declared_types(engine)
    leaves_ = [p for p, v in paths.items() if not (isinstance(v, dict) and v)]
    untyped = [p for p in leaves_ if not covered(p, declared)]
    assert untyped == [], (
        "keys in the YAML with no type: verl declares none, so add each to verl_roles/own_types.py"
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_every_yaml_default_has_its_declared_type(engine):
    cfg = compose_raw("ppo_trainer", [f"model_engine={engine}"])
    assert [p.render() for p in schema.type_problems(cfg)] == []
    resolved = verl_roles.compose([f"model_engine={engine}"])
    assert [p.render() for p in schema.type_problems(resolved)] == []


# Values a user can type on the command line, as Hydra parses them.
SAMPLES: tuple[object, ...] = (
    3, -1, 2.5, True, "text", "0.6_1.6", None, [1, 2], [0.9, 0.99], ["a", "b"], [], {"k": 1}, {},
)


def verl_accepts(descriptor: Any, value: object) -> bool:
    """What a value of verl's declared type is, written from the frozen descriptors on their own.

    Leniency, as OmegaConf reads a YAML scalar: an int is a number, any scalar is a string.
    """
    if isinstance(descriptor, str):
        return {
            "any": lambda: True,
            "none": lambda: value is None,
            "bool": lambda: isinstance(value, bool),
            "int": lambda: isinstance(value, int) and not isinstance(value, bool),
            "float": lambda: isinstance(value, int | float) and not isinstance(value, bool),
            "str": lambda: isinstance(value, str | int | float | bool),
            "bytes": lambda: isinstance(value, str | int | float | bool),
        }[descriptor]()
    kind = descriptor["kind"]
    if kind == "optional":
        return value is None or verl_accepts(descriptor["of"], value)
    if kind == "union":
        return any(verl_accepts(member, value) for member in descriptor["of"])
    if kind in ("list", "set"):
        return isinstance(value, list) and all(verl_accepts(descriptor["of"], v) for v in value)
    if kind == "tuple":
        if not isinstance(value, list):
            return False
        if descriptor["variadic"]:
            return all(verl_accepts(descriptor["of"][0], v) for v in value) if descriptor["of"] else True
        return len(value) == len(descriptor["of"]) and all(
            verl_accepts(d, v) for d, v in zip(descriptor["of"], value, strict=True)
        )
    if kind == "dict":
        return isinstance(value, dict) and all(verl_accepts(descriptor["value"], v) for v in value.values())
    if kind in ("literal", "enum"):
        return any(type(value) is type(v) and value == v for v in descriptor["values"])
    if kind == "dataclass":
        return isinstance(value, dict)
    return True


@pytest.mark.parametrize("engine", engines())
def test_every_verl_typed_key_accepts_exactly_what_verl_declares(engine):
    declared = schema.declared_types(engine)
    mismatches = []
    for path, leaf in leaves(engine).items():
        descriptor = "str" if "target_of" in (leaf.get("declared") or {}) else declared_type(leaf)
        if descriptor is None or descriptor == "any":
            continue
        for value in SAMPLES:
            # verl's own defaults rely on null where its dataclass says otherwise: null is accepted there.
            expected = verl_accepts(descriptor, value) or (value is None and leaf.get("resolved", "") is None)
            if declared[path].accepts(value) != expected:
                mismatches.append((path, value, expected))
    assert mismatches == []


def test_our_table_names_no_key_verl_types():
    typed_by_verl = {
        path
        for engine in engines()
        for path, leaf in leaves(engine).items()
        if declared_type(leaf) not in (None, "any") or "target_of" in (leaf.get("declared") or {})
    }
    assert sorted(set(OWN_TYPES) & typed_by_verl) == []


def test_our_table_has_no_stale_entry():
    present: set[str] = set()
    for engine in ENGINES:
        present |= set(yaml_paths(compose_raw("ppo_trainer", [f"model_engine={engine}"])))
    stale = set(OWN_TYPES) - present - set(READ_WHEN_ADDED)
    assert sorted(stale) == [], "entries of verl_roles/own_types.py the YAML no longer has"
    assert not set(READ_WHEN_ADDED) & present, "a key read when added that the YAML now has: move it"


def test_packaged_verl_types_are_generated_from_the_frozen_reference():
    module = generator()
    fresh = module.render_file()
    assert (REPO / "verl_roles" / "verl_reference.json").read_text(encoding="utf-8") == fresh, (
        "verl_roles/verl_reference.json is stale: run python scripts/generate_verl_schema.py"
    )
    assert module.main(["--check"]) == 0


def test_packaged_names_are_verls_lists():
    names = json.loads((REPO / "verl_roles" / "verl_reference.json").read_text())["names"]
    assert "token-sum" in names["loss_agg_mode"]
    assert {"gdpo", "optimal_token_baseline", "tir_optimal_token_baseline"} <= set(names["adv_estimator"])


@pytest.mark.parametrize(
    "override",
    [
        "trainer.logger=console",
        "trainer.logger=[console,wandb]",
        "global_profiler.steps=[2,4]",
        "global_profiler.steps=null",
        "actor_rollout_ref.actor.optim.lr_warmup_steps=null",
        "critic.optim.lr_warmup_steps=null",
        "algorithm.rollout_correction.rollout_rs_threshold='0.6_1.6'",
        "algorithm.rollout_correction.rollout_rs_threshold=2.0",
        "algorithm.rollout_correction.rollout_is_threshold='0.5_4.0'",
        "actor_rollout_ref.actor.optim.min_lr_ratio=null",
        "custom_reward_function.name=null",
        "reward.custom_reward_function.name=null",
        "actor_rollout_ref.model.lora.exclude_modules='.*visual.*'",
        "actor_rollout_ref.model.exclude_modules='.*visual.*'",
        "actor_rollout_ref.actor.profiler.save_path=null",
        "actor_rollout_ref.actor.loss_scale_factor=512",
        "trainer.test_freq=False",
    ],
)
def test_values_verl_accepts_compose(override):
    verl_roles.compose([override])


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("trainer.nnodes=abc", "an integer"),
        ("actor_rollout_ref.actor.optim.lr=fast", "a number"),
        ("actor_rollout_ref.rollout.enforce_eager=maybe", "true or false"),
        ("data.max_prompt_length=[1,2]", "an integer"),
        ("trainer.logger=null", "a string or a list of strings"),
        ("global_profiler.steps=[first]", "a list of integers or null"),
        ("actor_rollout_ref.actor.optim.betas=[0.9]", "a list of 2 numbers"),
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2.5", "an integer or null"),
        ("actor_rollout_ref.actor.checkpoint.save_contents=model", "a list of strings"),
        ("actor_rollout_ref.actor.checkpoint=3", "a mapping"),
    ],
)
def test_wrong_type_is_caught_at_compose_time(override, expected):
    with pytest.raises(verl_roles.ConfigError) as raised:
        verl_roles.compose([override])
    message = str(raised.value)
    key = override.partition("=")[0]
    assert f"{key}: has the wrong type" in message
    assert f"Expected {expected}" in message
    assert f"command line override `{override}`" in message


def test_literal_types_name_the_allowed_values():
    key_type = schema.parse_type('Literal["default", "always", "never"] | None')
    assert key_type.accepts("always") and key_type.accepts(None)
    assert not key_type.accepts("sometimes")
    assert key_type.describe() == 'one of "default", "always", "never" or null'


def test_accepted_conversions():
    cfg = verl_roles.compose(
        ["actor_rollout_ref.actor.optim.lr=1", "trainer.project_name=123",
         "data.train_files=[a.parquet,b.parquet]"]
    )
    assert cfg.actor_rollout_ref.actor.optim.lr == 1


def test_keys_added_with_plus_are_not_checked():
    cfg = verl_roles.compose(["+trainer.my_note=[1, {a: b}]", "+reward.reward_kwargs.max_resp_len=abc"])
    assert cfg.trainer.my_note[0] == 1
