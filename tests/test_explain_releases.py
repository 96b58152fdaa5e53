"""``verl-roles explain KEY`` and ``verl-roles keys KEY`` of a key the composed release does not have but the
release data knows: a key of other releases only (which ones, and the command that shows it), a name
another release gives a key (the rename, either direction, as ``diff`` pairs it), and a legacy name. Each
suggested command is run: it answers."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from conftest import DATA

from verl_roles.base import releases
from verl_roles.cli import main as cli
from verl_roles.legacy import find

DEFAULT, OLD = releases.DEFAULT_RELEASE, releases.supported()[0]
RENAMED_OLD, RENAMED_NEW = "actor_rollout_ref.rollout.skip.enable", "skip.rollout.enable"


def only_in(release: str) -> str:
    """A leaf key only ``release`` has among the supported releases, under the default engine (dp), and no
    legacy name of the default release."""
    composed = json.loads((DATA / f"verl-{release}" / "composition" / "dp.json").read_text(encoding="utf-8"))
    return next(key for key in sorted(composed["leaves"])
                if releases.releases_with(key) == (release,) and find(key, DEFAULT) is None)


def run(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    code = cli(args)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.out, captured.err


def suggested(err: str) -> list[list[str]]:
    """The `verl-roles ...` commands an error's fix names, as argument lists."""
    return [shlex.split(text)[1:] for text in re.findall(r"`(verl-roles [^`]+)`", err)]


@pytest.mark.parametrize("command", ["explain", "keys"])
@pytest.mark.parametrize("release", [r for r in releases.supported() if r != DEFAULT])
def test_a_key_of_another_release_names_it_and_the_command_that_shows_it(command, release, capsys):
    key = only_in(release)
    code, out, err = run(capsys, [command, key])
    assert code == 2 and out == ""
    assert f"{key}: is a key of verl {release} only" in err and f"written for verl {DEFAULT}" in err
    assert "not a key" not in err and "matches no key" not in err and "model_engine=" not in err
    (fix,) = suggested(err)
    assert fix == [command, key, releases.choice(release)]
    code, out, err = run(capsys, fix)
    assert code == 0 and key in out, err


@pytest.mark.parametrize("command", ["explain", "keys"])
def test_a_key_another_release_has_under_another_engine_names_the_engine_too(command, capsys):
    release, key, engine = next(
        (r, k, e) for r in releases.supported() if r != DEFAULT
        for k, declared in sorted(releases.reference(r)["types"].items())
        if isinstance(declared, dict) and "dp" not in declared and releases.releases_with(k) == (r,)
        for e in declared if releases.ships(r, e))
    code, _, err = run(capsys, [command, key, "model_engine=dp"])
    assert code == 2 and f"is a key of verl {release} only" in err and f"model_engine={engine}" in err
    (fix,) = suggested(err)
    assert fix == [command, key, releases.choice(release), f"model_engine={engine}"]
    code, out, err = run(capsys, fix)
    assert code == 0 and key in out, err


@pytest.mark.parametrize("command", ["explain", "keys"])
def test_a_key_another_release_has_on_a_release_chosen_on_the_line(command, capsys):
    key = only_in(next(r for r in releases.supported() if r not in (OLD, DEFAULT)))
    code, _, err = run(capsys, [command, key, releases.choice(OLD), "trainer.nnodes=2"])
    assert code == 2 and f"switch {releases.choice(OLD)} to" in err
    (fix,) = suggested(err)
    assert releases.choice(OLD) not in fix and "trainer.nnodes=2" in fix
    assert run(capsys, fix)[0] == 0


@pytest.mark.parametrize("command", ["explain", "keys"])
@pytest.mark.parametrize(
    ("key", "line", "current"),
    [(RENAMED_OLD, [], RENAMED_NEW), (RENAMED_NEW, [releases.choice(OLD)], RENAMED_OLD)],
    ids=["older-name", "newer-name"],
)
def test_a_renamed_key_points_to_the_name_of_the_composed_release(command, key, line, current, capsys):
    code, out, err = run(capsys, [command, key, *line])
    assert code == 2 and out == ""
    assert f"{key}: is " in err and f" for {current}, the key of verl" in err
    assert "did you mean" not in err and "profiler" not in err
    this, other = suggested(err)
    assert this == [command, current, *line]
    assert other[:2] == [command, key] and other[-1].startswith(f"{releases.VERSION_KEY}=")
    for fix in (this, other):
        code, out, err = run(capsys, fix)
        assert code == 0 and fix[1] in out, err


def test_a_legacy_name_points_to_the_current_key(capsys):
    code, _, err = run(capsys, ["explain", "critic.model.fsdp_config.param_offload"])
    assert code == 2 and "is a legacy name for critic.fsdp.param_offload" in err
    assert suggested(err) == [["explain", "critic.fsdp.param_offload"]]


def test_a_glob_of_another_releases_keys_names_it(capsys):
    release, key = next((r, k) for r in releases.supported() if r != DEFAULT
                        for k in [only_in(r)] if not releases.has_key(DEFAULT, k.rpartition(".")[0]))
    pattern = f"{key.rpartition('.')[0]}.*"
    code, _, err = run(capsys, ["keys", pattern])
    assert code == 2 and f"matches keys of verl {release}" in err
    (fix,) = suggested(err)
    assert fix[-1] == releases.choice(release)
    assert run(capsys, fix)[0] == 0


def test_a_key_no_release_has_is_still_a_did_you_mean(capsys):
    code, _, err = run(capsys, ["explain", "trainer.nnodez"])
    assert code == 2 and "did you mean `trainer.nnodes`" in err
