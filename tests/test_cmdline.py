"""The one command-line model: flags and overrides split as Hydra splits them, every override read by
Hydra's own parser, group choices told from keys as Hydra tells them; and every entry point that
reads it (main, the API, explain, diff, migrate) agrees."""

from __future__ import annotations

import warnings

import pytest
from conftest import flat, main_in_process, run_in_process
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from hydra.core.plugins import Plugins
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

import verl_roles
from verl_roles.cli import main as cli
from verl_roles.compat.hydra import RepositoryBase, args_parser, search_path_of
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.config_tree import CONF_DIR
from verl_roles.inputs.flags import HYDRA_FLAGS, OPTIONAL, REQUIRED
from verl_roles.legacy import read_command_line, translate_command

# What Hydra/OmegaConf do decides these tests' outcome: CI runs them on both stacks.
pytestmark = pytest.mark.stack

# ---------------------------------------------------------------------------------------------------
# The flag table is Hydra's.


def hydra_options() -> dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]]:
    """Hydra's own argument parser: long name -> (spellings, value kind, choices)."""
    options = {}
    for action in args_parser()._actions:
        if not action.option_strings:
            continue
        if action.nargs == 0:
            kind = "none"
        elif action.nargs == "?":
            kind = OPTIONAL
        else:
            kind = REQUIRED
        names = tuple(sorted(action.option_strings, key=lambda n: (not n.startswith("--"), n)))
        options[names[0]] = (tuple(action.option_strings), kind, tuple(action.choices or ()))
    return options


def test_flag_table_is_hydras():
    ours = {spec.name: (set(spec.names), spec.value, spec.choices) for spec in HYDRA_FLAGS}
    theirs = {name: (set(names), kind, choices) for name, (names, kind, choices) in hydra_options().items()}
    assert ours == theirs


# ---------------------------------------------------------------------------------------------------
# Property: on generated command lines the model agrees with Hydra's argument parser, Hydra's override
# parser and Hydra's config repository (which decides what is a group choice).

KEYS = st.sampled_from(
    [
        "trainer.nnodes", "critic.optim.lr", "a", "a.b_c", "model_engine", "role/critic", "role/actor",
        "data", "hydra.run.dir", "hydra/launcher", "actor_rollout_ref.model.lora_rank", "megatron.x",
    ]
)
VALUES = st.sampled_from(
    [
        "1", "-2", "1e-5", "true", "null", "abc", "'a b'", '"x,y"', "[a,b]", "[]", "{a: 1}", "{}",
        "${trainer.nnodes}", "a,b", "1,2,3", "range(1,3)", "choice(a,b)", "dp", "megatron", "", "[a,",
    ]
)


@st.composite
def overrides(draw: st.DrawFn) -> str:
    prefix = draw(st.sampled_from(["", "", "+", "++", "~"]))
    key = draw(KEYS)
    package = draw(st.sampled_from(["", "", "@critic.x", "@_global_"]))
    if prefix == "~" and draw(st.booleans()):
        return f"~{key}{package}"
    return f"{prefix}{key}{package}={draw(VALUES)}"


FLAGS = [
    ["--cfg", "job"], ["-c", "all"], ["--cfg=hydra"], ["-p", "actor_rollout_ref.model.lora_rank"],
    ["--package", "trainer"], ["--resolve"], ["-m"], ["--multirun"], ["--info", "defaults"],
    ["-i", "searchpath"], ["--config-name", "ppo_megatron_trainer"], ["-cn", "ppo_trainer.yaml"],
    ["--config-name=legacy_run"], ["-cd", "myconf"], ["--config-dir=other"], ["-cp", "/tmp"],
    ["--hydra-help"], ["-sc"], ["--run"], ["--config-n", "abbreviated"],
]
# `--info` without a value takes the next argument if it is one of its choices, so Hydra's parser
# accepts it only last.
LAST_FLAGS = [*FLAGS, ["--info"], ["-i"]]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """Flags before and after a run of overrides: the orders Hydra's parser accepts."""
    before = [token for group in draw(st.lists(st.sampled_from(FLAGS), max_size=3)) for token in group]
    after = [token for group in draw(st.lists(st.sampled_from(FLAGS), max_size=2)) for token in group]
    last = draw(st.sampled_from([[], [], *LAST_FLAGS]))
    return [*before, *draw(st.lists(overrides(), max_size=6)), *after, *last]


REPO: list[RepositoryBase] = []


def hydra_is_group(key: str) -> bool:
    if not REPO:
        Plugins.instance()
        REPO.append(RepositoryBase(config_search_path=search_path_of(str(CONF_DIR))))
    return REPO[0].group_exists(key)


@settings(max_examples=100)  # within the suite's profile (tests/conftest.py): the same examples every run
@given(command_lines())
def test_model_agrees_with_hydra(args):
    command = CommandLine.parse(args)
    namespace = args_parser().parse_args(args)
    # Flags and their values are Hydra's; a flag's value is never an override.
    assert command.texts() == namespace.overrides
    assert command.config_name_typed == namespace.config_name
    assert command.config_dir == namespace.config_dir
    assert command.is_multirun == namespace.multirun
    for spec, attribute in (("--cfg", "cfg"), ("--package", "package"), ("--info", "info")):
        flag = next((f for f in reversed(command.flags) if f.name == spec), None)
        assert (flag.value if flag else None) == getattr(namespace, attribute)
    assert command.argv() == args
    # The legacy translation rewrites override values only, never a flag or a flag's value.
    assert translate_command(command).command.flags == command.flags
    # Each override is what Hydra's override parser reads.
    parser = OverridesParser.create()
    for override in command.overrides:
        try:
            parsed = parser.parse_override(override.text)
        except Exception:  # noqa: BLE001 - text the grammar rejects keeps its spelling
            assert override.parsed is None
            continue
        assert (override.key, override.type, override.package) == (
            parsed.key_or_group, parsed.type, parsed.package,
        )
        assert override.is_sweep == parsed.is_sweep_override()
        assert override.is_hydra == parsed.is_hydra_override()
        # Hydra's rule for the defaults list (ConfigLoaderImpl / defaults_list: a group, not a dict).
        hydra_group = not isinstance(parsed.value(), dict) and hydra_is_group(parsed.key_or_group)
        assert override.is_group == hydra_group, override.text


# ---------------------------------------------------------------------------------------------------
# What the command line sets, one answer for everyone.


def test_keys_set_deleted_and_added_with_their_package():
    command = CommandLine.parse(
        ["~critic.optim.lr", "critic.megatron@critic.x=1", "+critic.num_nodes=2", "~role/critic",
         "model_engine=megatron", "++trainer.extra=3", "-p", "actor_rollout_ref.model.lora_rank"]
    )
    assert command.set_keys() == ["critic.megatron", "critic.num_nodes", "trainer.extra"]
    assert command.touched_keys() == [
        "critic.optim.lr", "critic.megatron", "critic.num_nodes", "trainer.extra",
    ]
    assert command.group_choices() == {"role/critic": None, "model_engine": "megatron"}
    packaged = command.override_for("critic.megatron")
    assert packaged is not None and packaged.package == "critic.x"
    assert command.engine("dp") == "megatron"
    assert [o.type for o in command.overrides].count(OverrideType.DEL) == 2


@pytest.mark.parametrize(
    "args",
    [
        ["--config-name", "ppo_megatron_trainer"],
        ["-cn", "ppo_megatron_trainer"],
        ["--config-name=ppo_megatron_trainer"],
        ["--config-name", "ppo_megatron_trainer.yaml"],
        ["-cn=ppo_megatron_trainer.yaml"],
    ],
)
def test_every_spelling_of_the_config_name_is_one_name(args):
    assert CommandLine.parse([*args, "a=1"]).config_name == "ppo_megatron_trainer"


# ---------------------------------------------------------------------------------------------------
# The entry points read it the same way.


@pytest.mark.parametrize("name", ["ppo_megatron_trainer", "ppo_megatron_trainer.yaml"])
def test_deprecated_name_with_or_without_yaml_warns_and_composes_the_same(name):
    with pytest.warns(verl_roles.ConfigDeprecationWarning) as record:
        legacy = verl_roles.compose(config_name=name)
    (message,) = [str(w.message) for w in record]
    assert message.startswith("--config-name ppo_megatron_trainer is deprecated")
    assert flat(legacy) == flat(verl_roles.compose(["model_engine=megatron"]))


def test_deprecated_name_with_yaml_warns_on_the_command_line(tmp_path, capsys):
    code, _, err = main_in_process(["--config-name=ppo_megatron_trainer.yaml"], tmp_path, capsys)
    assert code == 0, err
    assert "--config-name ppo_megatron_trainer is deprecated" in err


def test_group_deletion_composes_in_the_api_and_in_diff(capsys):
    cfg = verl_roles.compose(["~role/critic"])
    assert cfg.critic.optim.lr == 1e-5  # no role option; the stock critic values (critic/stock.yaml) stay
    assert cli(["diff", "--", "~role/critic"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["B: ~role/critic", "same: every resolved value of A and B is equal"]


def test_api_reads_a_config_dir(tmp_path):
    option = tmp_path / "myconf" / "role" / "critic" / "high_lr.yaml"
    option.parent.mkdir(parents=True)
    option.write_text("# @package critic\noptim:\n  lr: 3.0e-05\n", encoding="utf-8")
    cfg = verl_roles.compose(["role/critic=high_lr"], config_dir=str(tmp_path / "myconf"))
    assert cfg.critic.optim.lr == 3e-5
    with pytest.raises(verl_roles.ConfigError, match="--config-dir: .* is not a directory"):
        verl_roles.compose(config_dir=str(tmp_path / "nope"))


def test_a_flag_value_is_never_translated_as_a_legacy_key(in_tmp):
    args = ["--cfg", "job", "-p", "actor_rollout_ref.model.lora", "actor_rollout_ref.model.lora_rank=8"]
    result = run_in_process(args, cwd=in_tmp)
    assert result.returncode == 0, result.stderr
    assert OmegaConf.create(result.stdout).rank == 8
    assert result.stderr.count("verl's flat LoRA key") == 1 and "(deleted)" not in result.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unchanged = CommandLine.parse(["--cfg", "job", "-p", "actor_rollout_ref.model.lora_rank"])
        assert read_command_line(unchanged).command.argv() == unchanged.argv()
