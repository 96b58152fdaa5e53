"""verl releases as data: the seam (verl_roles/base/releases.py), its generated files, and what choosing a
release with ``verl_version=`` does to a config, through every channel a key can come from.

The surface of each release (every leaf present with that release's value) is tests/test_verl_surface.py;
the real verl of each release is the acceptance suite.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest
import verl_reference as vr
from conftest import REPO, assert_user_error, flat, run_in_process, write
from omegaconf import OmegaConf

import verl_roles
from verl_roles import ConfigError
from verl_roles.base import releases
from verl_roles.base.layout import PRIMARY_CONFIG

OLDEST = releases.supported()[0]
DEFAULT = releases.DEFAULT_RELEASE


def test_the_supported_releases_are_the_frozen_references_and_each_is_an_option():
    folders = [p for p in vr.DATA.glob("verl-*") if (p / "meta.json").is_file()]
    frozen = sorted((p.name.removeprefix("verl-") for p in folders),
                    key=lambda r: tuple(map(int, r.split("."))))
    assert list(releases.supported()) == frozen
    options = sorted(p.stem for p in (REPO / "conf" / releases.VERSION_KEY).glob("*.yaml"))
    assert options == sorted(frozen)
    assert DEFAULT in frozen and len(frozen) >= 2
    primary = (REPO / "conf" / f"{PRIMARY_CONFIG}.yaml").read_text(encoding="utf-8")
    assert re.search(rf"^  - {releases.VERSION_KEY}: {re.escape(DEFAULT)}$", primary, re.MULTILINE)


def test_the_generated_release_files_are_fresh(monkeypatch: pytest.MonkeyPatch, capsys):
    """The script's --check, run in this process (its output is the point; .ci/run runs it as a program
    too): the script puts this checkout first on sys.path, which is undone afterwards."""
    import importlib.util

    monkeypatch.setattr(sys, "path", list(sys.path))
    path = REPO / "scripts" / "generate_verl_releases.py"
    spec = importlib.util.spec_from_file_location("generate_verl_releases", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    code = script.main(["--check"])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "generated release files are fresh" in captured.out


def test_every_release_has_an_extra_that_installs_it():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    for release in releases.supported():
        pins = extras[releases.extra(release)]
        assert [p for p in pins if re.fullmatch(rf"verl(\[[\w,-]+\])?=={re.escape(release)}", p)], pins
    assert extras["verl"] == extras[releases.extra(DEFAULT)]
    verl_extras = {name for name in extras if name.startswith("verl-")}
    assert verl_extras == {releases.extra(r) for r in releases.supported()}, "an extra of no release"


def test_a_config_records_its_release():
    assert verl_roles.compose([]).verl_version == DEFAULT
    assert verl_roles.compose([releases.choice(OLDEST)]).verl_version == OLDEST


def test_a_release_verl_roles_does_not_support_is_one_paragraph(in_tmp: Path):
    result = run_in_process(["verl_version=0.1.0"], in_tmp)
    assert_user_error(result, "verl_version: has no option '0.1.0'", ", ".join(releases.supported()))
    assert list(in_tmp.iterdir()) == []


# --------------------------------------------------------------------------- what a layer changes


def _flat(overrides: list[str]) -> dict[str, object]:
    return flat(verl_roles.compose(overrides))


def test_a_changed_default_lands_where_the_roles_follow_it():
    """verl 0.8.0's Megatron blocks default vanilla_mbridge to true: the layer sets the baseline, so a
    baseline override still reaches every role, and a role override only that role."""
    layer = releases.layer("0.8.0", "megatron")
    assert layer["set"].get("megatron.vanilla_mbridge") is True
    base = ["model_engine=megatron", releases.choice("0.8.0")]
    blocks = ("actor_rollout_ref.actor.megatron", "actor_rollout_ref.ref.megatron", "critic.megatron")
    assert {_flat(base)[f"{b}.vanilla_mbridge"] for b in blocks} == {True}
    following = _flat([*base, "megatron.vanilla_mbridge=false"])
    assert {following[f"{b}.vanilla_mbridge"] for b in blocks} == {False}
    one = _flat([*base, "critic.megatron.vanilla_mbridge=false"])
    assert [one[f"{b}.vanilla_mbridge"] for b in blocks] == [True, True, False]
    assert _flat(["model_engine=megatron"])["critic.megatron.vanilla_mbridge"] is False


def test_a_key_every_role_block_gains_follows_the_baseline():
    base = ["model_engine=megatron", releases.choice("0.8.0")]
    values = _flat([*base, "megatron.grad_offload=true"])
    assert [values[f"{s}.megatron.grad_offload"] for s in
            ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")] == [True, True, True]


def test_keys_a_release_lacks_are_gone_and_so_is_the_baseline_key_only_they_followed():
    megatron_080 = _flat(["model_engine=megatron", releases.choice("0.8.0")])
    megatron_default = _flat(["model_engine=megatron"])
    assert "actor_rollout_ref.rollout.seed" in megatron_default
    assert "actor_rollout_ref.rollout.seed" not in megatron_080
    assert "actor_rollout_ref.actor.megatron.pad_to_length" not in megatron_080
    assert "megatron.pad_to_length" in megatron_default and "megatron.pad_to_length" not in megatron_080
    assert not [k for k in megatron_080 if k.startswith("algorithm.filter_groups")]


# --------------------------------------------------------------------------- one verdict per channel


KEY_0_8_ONLY = "actor_rollout_ref.actor.megatron.grad_offload"
KEY_0_9_ONLY = "actor_rollout_ref.actor.megatron.pad_to_length"


@pytest.mark.parametrize(
    ("release", "key", "value", "other"),
    [(DEFAULT, KEY_0_8_ONLY, "true", OLDEST), (OLDEST, KEY_0_9_ONLY, "3", DEFAULT)],
    ids=["key-of-an-older-release", "key-of-a-newer-release"],
)
@pytest.mark.parametrize(
    "channel", ["command-line", "command-line-plus", "role-option", "primary-config", "slime-file"]
)
def test_a_key_of_another_release_gets_one_verdict_through_every_channel(
    tmp_path: Path, channel: str, release: str, key: str, value: str, other: str
):
    """The main job and the API refuse it alike, naming the release that has it; nothing is written."""
    base = ["model_engine=megatron", *([releases.choice(release)] if release != DEFAULT else [])]
    conf = tmp_path / "conf"
    section, _, leaf = key.rpartition(".")
    overrides, config_name = list(base), PRIMARY_CONFIG
    if channel == "command-line":
        overrides.append(f"{key}={value}")
    elif channel == "command-line-plus":
        overrides.append(f"+{key}={value}")
    elif channel == "role-option":
        relative = key.removeprefix("actor_rollout_ref.actor.").split(".")
        write(conf / "role" / "actor" / "mine.yaml", "# @package actor_rollout_ref.actor\n" +
              "".join(f"{'  ' * i}{part}:\n" for i, part in enumerate(relative[:-1]))
              + f"{'  ' * (len(relative) - 1)}{relative[-1]}: {value}\n")
        overrides.append("role/actor=mine")
    elif channel == "slime-file":
        relative = key.removeprefix("actor_rollout_ref.actor.")
        slime_file = write(tmp_path / "roles.yaml", f"megatron:\n  - role: actor\n    overrides:\n"
                           f"      {relative}: {value}\n")
        overrides.append(f"megatron_config_path={slime_file}")
    else:
        nested = "".join(f"{'  ' * i}{part}:\n" for i, part in enumerate(section.split(".")))
        write(conf / "mine.yaml", f"defaults:\n  - {PRIMARY_CONFIG}\n  - _self_\n\n{nested}"
              f"{'  ' * (section.count('.') + 1)}{leaf}: {value}\n")
        config_name = "mine"
    config_dir = str(conf) if conf.exists() else None
    flags = ["--config-dir", config_dir] if config_dir else []
    flags += ["--config-name", config_name] if config_name != PRIMARY_CONFIG else []
    (tmp_path / "run").mkdir()
    run_dir = f"hydra.run.dir={tmp_path / 'run' / 'out'}"
    result = run_in_process([*flags, *overrides, run_dir], tmp_path / "run")
    phrases = (key, f"verl {other}", f"written for verl {release}, which has no such key")
    assert_user_error(result, *phrases)
    suggested = re.findall(rf"`{releases.VERSION_KEY}=([\d.]+)`", result.stderr)
    assert suggested and releases.has_key(suggested[-1], key), result.stderr
    assert list((tmp_path / "run").iterdir()) == []
    with pytest.raises(ConfigError) as raised:
        verl_roles.compose(overrides, config_name=config_name, config_dir=config_dir)
    assert all(phrase in str(raised.value) for phrase in phrases), str(raised.value)


def test_a_slime_file_sets_a_key_of_the_release_it_is_read_for(tmp_path: Path):
    """The same file line is refused above under the default release and read under the release that
    has the key, as the command line's `actor_rollout_ref.actor.megatron.grad_offload=true` is."""
    relative = KEY_0_8_ONLY.removeprefix("actor_rollout_ref.actor.")
    text = f"megatron:\n  - role: actor\n    overrides:\n      {relative}: true\n"
    slime_file = write(tmp_path / "roles.yaml", text)
    cfg = verl_roles.compose(
        ["model_engine=megatron", releases.choice(OLDEST), f"megatron_config_path={slime_file}"]
    )
    assert OmegaConf.select(cfg, KEY_0_8_ONLY) is True


# --------------------------------------------------------------------------- legacy keys per release


def test_a_key_a_release_has_is_not_legacy_there(recwarn: pytest.WarningsRecorder):
    """verl 0.8.0 dumps rollouts under actor_rollout_ref.rollout.skip; later releases moved it to `skip`."""
    old = verl_roles.compose([releases.choice("0.8.0"), "actor_rollout_ref.rollout.skip.enable=true"])
    assert old.actor_rollout_ref.rollout.skip.enable is True and "skip" not in old
    assert not [w for w in recwarn if "deprecated" in str(w.message)]
    new = verl_roles.compose(["actor_rollout_ref.rollout.skip.enable=true"])
    assert new.skip.rollout.enable is True
    assert [w for w in recwarn if "skip.rollout.enable" in str(w.message)]


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_no_release_is_spelled_in_code_outside_the_seam():
    # A message, example or default naming a release by its number goes stale at the next verl upgrade:
    # code asks the seam (releases.DEFAULT_RELEASE, releases.previous, a config's release_of). Prose of
    # docstrings may name a release as an example; string values the program prints or compares may not.
    spelled = re.compile("|".join(re.escape(r) for r in releases.supported()))
    seam = Path(releases.__file__).resolve()
    found = []
    for module in sorted((REPO / "verl_roles").rglob("*.py")):
        if module.resolve() == seam:
            continue
        tree = ast.parse(module.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        found += [
            f"{module.relative_to(REPO)}:{node.lineno}: {node.value[:80]!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs and spelled.search(node.value)
        ]
    assert not found, "a release number spelled outside verl_roles/base/releases.py:\n" + "\n".join(found)


def test_an_engine_the_release_does_not_ship_is_one_problem(monkeypatch: pytest.MonkeyPatch):
    """verl drops an engine in one release and ships another only in later ones: a config for such a
    release and engine is one problem naming the releases that ship it, not one per key of its blocks;
    tools and tests compose the engine under such a release (:func:`releases.engine_choice`)."""
    from verl_roles.validation.rules import sections

    older = [r for r in releases.supported() if r != DEFAULT]
    cfg = verl_roles.compose(["model_engine=veomni"])
    monkeypatch.setattr(releases, "ships", lambda release, engine: engine != "veomni" or release != DEFAULT)
    monkeypatch.setattr(sections, "ships", releases.ships)
    problems = sections.section_problems(cfg)
    assert [p.key for p in problems] == ["model_engine"]
    text = problems[0].render()
    assert f"verl {DEFAULT} does not ship" in text and f"{releases.VERSION_KEY}={older[-1]}" in text
    assert releases.release_for("veomni") == older[-1]
    assert releases.engine_choice("veomni") == ("model_engine=veomni", releases.choice(older[-1]))
    assert releases.engine_choice("megatron") == ("model_engine=megatron",)


def test_the_generator_reads_the_tree_without_judging_it_by_the_data_it_replaces(
    monkeypatch: pytest.MonkeyPatch,
):
    """New release data arrive by regenerating, so the tree the script reads (a role, an engine or a key new
    in conf/) cannot be judged by the data generated before it: with a gate that knows no verl class (stale
    data), the tree of an engine still reads, and the writing steps (sequence_parallel off at TP 1) ran."""
    import importlib.util

    from verl_roles.validation import gate

    monkeypatch.setattr(sys, "path", list(sys.path))
    path = REPO / "scripts" / "generate_verl_releases.py"
    spec = importlib.util.spec_from_file_location("generate_verl_releases", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(gate, "surface", lambda engine, release: gate.Surface({}, {}, (), (), release))
    tree = script.OurTree("megatron")
    assert tree.resolved_at("actor_rollout_ref.actor.megatron.sequence_parallel") is False
    raw = tree.raw_leaves["actor_rollout_ref.actor.megatron.sequence_parallel"]
    assert raw == "${megatron.sequence_parallel}"
