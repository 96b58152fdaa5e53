"""``verl-roles diff`` between two verl releases, as a user types it: grouped (renamed, removed, added,
default changed), limited to a glob (``--keys``) or to the keys the overrides set (``--set``), and a side
that only chooses a release taking the other side's overrides under its own names."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from conftest import assert_user_error, run_in_process

from verl_roles.base import releases

OLD, NEW = releases.supported()[0], releases.DEFAULT_RELEASE
UPGRADE = [releases.choice(OLD), "--", releases.choice(NEW)]
HEADING = re.compile(r"^(Renamed|Removed|Added|Default changed|Changed) \((\d+)\):$")
KIND = {"Renamed": "renamed", "Removed": "removed", "Added": "added", "Default changed": "changed",
        "Changed": "changed"}


def diff(args: list[str], cwd: Path) -> list[str]:
    result = run_in_process(["diff", *args], cwd, module="verl_roles.cli")
    assert result.returncode in (0, 1), result.stderr
    return result.stdout.splitlines()


def groups(lines: list[str]) -> dict[str, list[str]]:
    """Heading -> the lines under it; asserts each heading counts its lines."""
    found: dict[str, list[str]] = {}
    current = None
    for line in lines[2:-1]:
        heading = HEADING.match(line)
        if heading:
            current = heading.group(1)
            found[current] = []
        elif current is not None:
            found[current].append(line)
    for line in lines:
        heading = HEADING.match(line)
        if heading:
            assert len(found[heading.group(1)]) == int(heading.group(2)), line
    return found


def keys_of(lines: list[str]) -> list[str]:
    return [line.split()[1].rstrip(":") for line in lines]


def test_a_release_diff_is_grouped_renamed_removed_added_default_changed(in_tmp):
    lines = diff(UPGRADE, in_tmp)
    found = groups(lines)
    assert list(found) == ["Renamed", "Removed", "Added", "Default changed"]
    for heading, under in found.items():
        assert all(line.startswith(KIND[heading] + " ") for line in under), heading
    # The closing tally is the one of every diff.
    counts = {KIND[h]: len(u) for h, u in found.items()}
    assert lines[-1].endswith(f"{counts['added']} added, {counts['removed']} removed, "
                              f"{counts['renamed']} renamed, {counts['changed']} changed")


def test_a_diff_within_one_release_is_not_grouped(in_tmp):
    lines = diff(["--", "trainer.total_epochs=3"], in_tmp)
    assert not any(HEADING.match(line) for line in lines)


@pytest.mark.parametrize("pattern", ["actor_rollout_ref.actor.*", "*.max_num_seqs", "skip"])
def test_keys_limits_the_diff_to_a_glob_or_a_section(pattern, in_tmp):
    every = groups(diff(UPGRADE, in_tmp))
    lines = diff([*UPGRADE, "--keys", pattern], in_tmp)
    assert lines[2] == f"only: keys matching {pattern}"
    limited = groups(lines)

    def selected(line: str) -> bool:
        names = [line.split()[1].rstrip(":"), *([line.split()[3].rstrip(":")] if " -> " in line else [])]
        return any(fnmatchcase(n, pattern) or fnmatchcase(n, pattern + ".*") for n in names)

    expected = {h: [line for line in u if selected(line)] for h, u in every.items()}
    assert limited == {h: u for h, u in expected.items() if u}
    assert limited


def test_set_limits_the_diff_to_the_keys_the_overrides_set_under_either_name(in_tmp):
    # The new name on the side of the new release: the old side takes it under the old release's name.
    lines = diff([*UPGRADE, "skip.rollout.enable=true", "trainer.total_epochs=3", "--set"], in_tmp)
    assert lines[0].startswith("A: actor_rollout_ref.rollout.skip.enable=true trainer.total_epochs=3")
    assert lines[2] == "only: keys the overrides set"
    assert groups(lines) == {
        "Renamed": ["renamed actor_rollout_ref.rollout.skip.enable -> skip.rollout.enable: true"]}
    # The old name, typed on the new release's side, is read as its current key there.
    lines = diff([*UPGRADE, "actor_rollout_ref.rollout.skip.enable=true", "--set"], in_tmp)
    assert keys_of(groups(lines)["Renamed"]) == ["actor_rollout_ref.rollout.skip.enable"]


def test_a_limit_that_leaves_nothing_is_the_same_exit_zero(in_tmp):
    result = run_in_process(["diff", "--", "trainer.total_epochs=3", "--keys", "critic.*"], in_tmp,
                            module="verl_roles.cli")
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == "same: every resolved value of A and B is equal among those keys"


@pytest.mark.parametrize(
    ("args", "phrases"),
    [(["--stock", "--keys", "x"], ["not --stock"]),
     ([*UPGRADE, "--keys"], ["--keys", "needs a key pattern"])],
    ids=["with-stock", "no-pattern"],
)
def test_limit_mistakes_are_one_paragraph(args, phrases, in_tmp):
    assert_user_error(run_in_process(["diff", *args], in_tmp, module="verl_roles.cli"), *phrases)
