"""The typed schema and the YAML agree, for both engines, and a wrong type is caught at compose time."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import DictConfig, OmegaConf

import verl_roles
from verl_roles import schema
from verl_roles.hydra_context import compose_raw


def composed_keys(cfg: DictConfig, table: dict[str, schema.KeyType]) -> set[str]:
    """Every key path of ``cfg``, not descending into values the schema declares an open mapping."""
    keys: set[str] = set()

    def walk(node: object, prefix: str) -> None:
        for key, child in node.items():
            path = f"{prefix}{key}"
            keys.add(path)
            declared = table.get(path)
            if isinstance(child, dict) and (declared is None or declared.section is not None):
                walk(child, path + ".")

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return keys


@pytest.mark.parametrize("engine", ["dp", "megatron"])
def test_schema_and_yaml_have_the_same_keys(engine):
    table = schema.flat_schema(engine)
    keys = composed_keys(compose_raw("ppo_trainer", [f"model_engine={engine}"]), table)
    assert sorted(keys - set(table)) == [], "keys in the YAML but not in verl_roles/schema.py"
    assert sorted(set(table) - keys) == [], "keys in verl_roles/schema.py but not in the YAML"


@pytest.mark.parametrize("engine", ["dp", "megatron"])
def test_every_yaml_default_has_its_declared_type(engine):
    cfg = compose_raw("ppo_trainer", [f"model_engine={engine}"])
    assert [p.render() for p in schema.type_problems(cfg)] == []
    resolved = verl_roles.compose([f"model_engine={engine}"])
    assert [p.render() for p in schema.type_problems(resolved)] == []


def test_schema_holds_no_default_values():
    def classes(section: type) -> set[type]:
        found = {section}
        for key_type in schema.fields_of(section).values():
            if key_type.section is not None:
                found |= classes(key_type.section)
        return found

    for section in classes(schema.ROOT):
        for field in dataclasses.fields(section):
            assert field.default is dataclasses.MISSING, (section.__name__, field.name)
            assert field.default_factory is dataclasses.MISSING, (section.__name__, field.name)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("trainer.nnodes=abc", "an integer"),
        ("actor_rollout_ref.actor.optim.lr=fast", "a number"),
        ("actor_rollout_ref.rollout.enforce_eager=maybe", "true or false"),
        ("data.max_prompt_length=[1,2]", "an integer"),
        ("trainer.logger=console", "a list"),
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2.5", "an integer or null"),
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


def test_accepted_conversions():
    cfg = verl_roles.compose(
        ["actor_rollout_ref.actor.optim.lr=1", "trainer.project_name=123",
         "data.train_files=[a.parquet,b.parquet]"]
    )
    assert cfg.actor_rollout_ref.actor.optim.lr == 1
