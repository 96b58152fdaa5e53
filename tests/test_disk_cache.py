"""The composition cache on disk: results identical to composing from the files, keyed by content (an
edited file is never served stale), damaged entries recomputed, an unusable folder skipped silently.

Every test has a cache folder of its own (``XDG_CACHE_HOME`` under ``tmp_path``), and
``clear_caches()`` stands for a fresh process: it drops what this process holds, not what is on disk.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import pytest
from conftest import CONF, main_in_process, run, write
from omegaconf import OmegaConf

import verl_roles
from verl_roles import hydra_context
from verl_roles.disk_cache import NO_DISK_CACHE_ENV
from verl_roles.hydra_context import NO_CACHE_ENV, clear_caches
from verl_roles.output import to_yaml

MEGATRON = ["model_engine=megatron", "critic.optim.lr=2e-5"]


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An empty cache folder of this test, and nothing composed yet in this process."""
    home = tmp_path / "cache_home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)
    monkeypatch.delenv(NO_DISK_CACHE_ENV, raising=False)
    clear_caches()
    yield home
    clear_caches()


def entries(home: Path) -> dict[str, bytes]:
    folder = home / "verl_roles" / "compose-v1"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.pickle"))} if folder.is_dir() else {}


@pytest.fixture
def hydra_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each time Hydra really builds a defaults list (not served from a cache)."""
    calls: list[str] = []
    hydra_create = hydra_context._HYDRA_CREATE_DEFAULTS_LIST

    def counting(*args, **kwargs):
        calls.append("defaults list")
        return hydra_create(*args, **kwargs)

    monkeypatch.setattr(hydra_context, "_HYDRA_CREATE_DEFAULTS_LIST", counting)
    return calls


def fresh_compose(overrides: list[str]) -> str:
    clear_caches()
    return to_yaml(verl_roles.compose(overrides))


def test_cli_writes_byte_identical_files_with_and_without_the_disk_cache(cache_home, tmp_path, monkeypatch):
    """Three real processes: stock Hydra, one that fills the disk cache, one that reads it."""
    outputs = []
    for no_cache in ("1", "", ""):
        monkeypatch.setenv(NO_CACHE_ENV, no_cache)
        result = run([*MEGATRON, "hydra.run.dir=out"], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        out = tmp_path / "out"
        files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
        outputs.append((files, result.stdout, result.stderr))
        shutil.rmtree(out)
        if not no_cache:
            stored = entries(cache_home)
            assert len(stored) == 2  # one defaults list, one composition
    assert outputs[0] == outputs[1] == outputs[2]
    written = {".hydra/config.yaml", ".hydra/hydra.yaml", "resolved.yaml", "roles/critic.yaml"}
    assert written <= set(outputs[0][0])
    assert entries(cache_home) == stored  # the third run only read them


def test_api_result_from_disk_equals_stock_hydra(cache_home, monkeypatch, hydra_calls):
    overrides = [*MEGATRON, "+trainer.note=x", "~trainer.val_before_train"]
    with monkeypatch.context() as patch:
        patch.setenv(NO_CACHE_ENV, "1")
        stock = to_yaml(verl_roles.compose(overrides))
    filled = fresh_compose(overrides)
    assert entries(cache_home)
    hydra_calls.clear()
    from_disk = fresh_compose(overrides)
    assert hydra_calls == []  # the fresh process composed nothing itself
    assert stock == filled == from_disk


def same_size_edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` (same length) and put the modification time back: only the bytes
    tell the edit apart."""
    assert len(old) == len(new)
    info = path.stat()
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


@pytest.mark.parametrize("edited", ["file of the primary config tree", "file of a user --config-dir"])
def test_an_edited_file_is_never_served_from_disk(cache_home, tmp_path, capsys, edited):
    tree = tmp_path / "tree"
    shutil.copytree(CONF, tree)
    user = tmp_path / "user"
    write(user / "role/critic/mine.yaml", "# @package critic\n# Learning rate.\noptim:\n  lr: 3.0e-05\n")
    args = ["--config-path", str(tree), "--config-dir", str(user), "model_engine=megatron"]
    args.append("role/critic=mine")

    def critic_after_a_fresh_start():
        clear_caches()
        code, _, err = main_in_process(args, tmp_path, capsys)
        assert code == 0, err
        return OmegaConf.load(tmp_path / "out/resolved.yaml").critic

    critic = critic_after_a_fresh_start()
    assert (critic.megatron.seed, critic.optim.lr) == (42, 3e-05)
    stored = entries(cache_home)
    if edited == "file of the primary config tree":
        same_size_edit(tree / "engine/megatron.yaml", "\nseed: 42\n", "\nseed: 43\n")
        expected = (43, 3e-05)
    else:
        same_size_edit(user / "role/critic/mine.yaml", "lr: 3.0e-05", "lr: 4.0e-05")
        expected = (42, 4e-05)
    critic = critic_after_a_fresh_start()
    assert (critic.megatron.seed, critic.optim.lr) == expected
    assert set(entries(cache_home)) > set(stored)  # new entries next to the old ones


def garbage(path: Path, other: bytes) -> None:
    path.write_bytes(b"\x80\x05not a pickle at all")


def truncated(path: Path, other: bytes) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def folder(path: Path, other: bytes) -> None:  # unreadable as a file, and cannot be replaced
    path.unlink()
    path.mkdir()


# What each of the two entries (a defaults list and a composition) is turned into.
DAMAGES = {
    "garbage, truncated": (garbage, truncated),
    "a folder in its place": (folder, folder),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_entry_is_ignored_and_computed_again(cache_home, hydra_calls, damage):
    reference = fresh_compose(MEGATRON)
    good = entries(cache_home)
    folder_path = cache_home / "verl_roles" / "compose-v1"
    names = list(good)
    for name, other, damage_one in zip(names, reversed(names), DAMAGES[damage], strict=True):
        damage_one(folder_path / name, good[other])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh_compose(MEGATRON) == reference
    if damage != "a folder in its place":
        assert set(entries(cache_home)) == set(good)
        hydra_calls.clear()
        assert fresh_compose(MEGATRON) == reference
        assert hydra_calls == []  # written again, sound


def test_an_entry_of_another_key_is_not_served(cache_home):
    """Each megatron entry replaced by the dp entry of the same kind (a sound entry, of another key)."""
    dp = fresh_compose(["model_engine=dp"])
    dp_entries = entries(cache_home)
    reference = fresh_compose(MEGATRON)
    folder_path = cache_home / "verl_roles" / "compose-v1"
    for name, data in entries(cache_home).items():
        if name not in dp_entries:
            same_kind = min(dp_entries.values(), key=lambda other: abs(len(other) - len(data)))
            (folder_path / name).write_bytes(same_kind)
    assert fresh_compose(MEGATRON) == reference != dp


@pytest.mark.skipif(not hasattr(os, "chown") or os.getuid() != 0, reason="needs root to give a file away")
def test_an_entry_of_another_user_is_not_read(cache_home, hydra_calls):
    reference = fresh_compose(MEGATRON)
    for name in entries(cache_home):
        os.chown(cache_home / "verl_roles" / "compose-v1" / name, 12345, 12345)
    hydra_calls.clear()
    assert fresh_compose(MEGATRON) == reference
    assert hydra_calls == ["defaults list"]


@pytest.mark.parametrize("folder", ["a file", "writable by others"])
def test_an_unusable_cache_folder_is_skipped_silently(tmp_path, monkeypatch, cache_home, folder):
    if folder == "a file":
        home = write(tmp_path / "not_a_folder", "")
    else:
        home = tmp_path / "shared"
        (home / "verl_roles" / "compose-v1").mkdir(parents=True)
        (home / "verl_roles" / "compose-v1").chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = fresh_compose(MEGATRON)
    assert "model_engine: megatron" in cfg
    assert not home.is_dir() or entries(home) == {}


@pytest.mark.parametrize("switch", [NO_DISK_CACHE_ENV, NO_CACHE_ENV])
def test_switches_keep_nothing_on_disk(cache_home, monkeypatch, switch):
    monkeypatch.setenv(switch, "1")
    fresh_compose(MEGATRON)
    assert entries(cache_home) == {}


def test_hydra_warnings_while_composing_come_every_time(cache_home, tmp_path, capsys):
    """A primary config without ``_self_`` makes Hydra warn; a result that warned is not kept on disk."""
    user = tmp_path / "user"
    write(user / "no_self.yaml", "defaults:\n  - ppo_trainer\n\n# Epochs.\ntrainer:\n  total_epochs: 3\n")
    for _ in range(2):
        clear_caches()
        code, _, err = main_in_process(
            ["--config-dir", str(user), "--config-name", "no_self", *MEGATRON], tmp_path, capsys
        )
        assert code == 0, err
        assert "UserWarning: In 'no_self': Defaults list is missing `_self_`" in err
        assert OmegaConf.load(tmp_path / "out/resolved.yaml").trainer.total_epochs == 3


def test_a_group_left_at_mandatory_is_an_error_on_every_run(cache_home, tmp_path, capsys):
    """``@hydra.main`` first composes in sweep mode, which skips a group left at ``???``; that defaults
    list must not stand in for the run's own composition, in this process or the next."""
    user = tmp_path / "user"
    write(user / "needs_choice.yaml", "defaults:\n  - ppo_trainer\n  - extra: ???\n  - _self_\n")
    write(user / "extra/one.yaml", "# A value.\na: 1\n")
    for _ in range(2):
        clear_caches()
        code, out, err = main_in_process(
            ["--config-dir", str(user), "--config-name", "needs_choice"], tmp_path, capsys
        )
        assert code == 2
        assert "You must specify 'extra'" in err and "one" in err
