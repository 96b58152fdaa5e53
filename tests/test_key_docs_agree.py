"""Key docs and validation agree: every value a key's comment names as a choice is accepted, and every
value validation accepts for a key with a fixed set of values is named in its comment.

The comment is the one ``verl-roles keys`` shows (the comment above the field in conf/). A comment names
its choices as ``A, B or C`` (an item may carry a parenthetical note: ``kl, k1 (same as kl), ...``),
``any of: A, B, C`` or ``always A``. The keys with a fixed set are read from validation itself: the enum
table of the rules, the LoRA adapter types, the ``Literal`` types of the schema and each role's
strategy under its engine. Where a release adds a value, the comment names it with the release
(``token-sum (verl 0.9 and later)``): every named value is accepted by at least one supported release,
and every value of every release is named.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from conftest import assert_user_error, run_in_process

import verl_roles
from verl_roles.base import layout, releases
from verl_roles.base.errors import ConfigError
from verl_roles.base.releases import engine_choice
from verl_roles.commands.keys import key_entries
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import CONFIG_FLAGS
from verl_roles.validation.rules.lora import LORA_TYPES
from verl_roles.validation.rules.tables import ENUMS
from verl_roles.validation.schema import declared_types, engine_strategies, verl_names

_WORD = r"[A-Za-z0-9_](?:[\w.+\-]*[\w+\-])?"
_ITEM = rf"`?{_WORD}`?(?: \([^)]*\))?"
_CHOICE_LISTS = (
    re.compile(rf"\b(?:any|one) of: ({_ITEM}(?:, {_ITEM})*)"),
    re.compile(rf"({_ITEM}(?:, {_ITEM})*,? or {_ITEM})"),
    re.compile(rf"\balways ({_ITEM})"),
)
_HEAD = re.compile(rf"`?({_WORD})`?")


def documented_choices(comment: str) -> list[str] | None:
    """The values a comment names as the key's choices (the first list of a form above), or None."""
    for pattern in _CHOICE_LISTS:
        match = pattern.search(comment)
        if match:
            listed = re.sub(r" \([^)]*\)", "", match.group(1))
            return [_HEAD.match(item.strip()).group(1) for item in re.split(r", | or ", listed)]
    return None


# The overrides that make validation check a key (its rule runs only when the setting is used).
ENABLE = {
    "algorithm.kl_penalty": ("algorithm.use_kl_in_reward=true",),
    f"{layout.ACTOR}.kl_loss_type": (f"{layout.ACTOR}.use_kl_loss=true",),
}
# verl_version is a Literal of the supported releases: its comment names none (a release list in a
# comment goes stale); an unsupported release is refused with the list (tests/test_releases.py).
NOT_LISTED = {releases.VERSION_KEY}
# A key whose comment says it follows another takes that key's documented choices.
FOLLOWS = {f"{layout.REF}.strategy": f"{layout.ACTOR}.strategy"}


@dataclass(frozen=True)
class EnumKey:
    """A key validation holds to a fixed set, under one engine: the values each release accepts."""

    engine: str
    key: str
    accepted: dict[str, tuple[str, ...]]
    nullable: bool = False
    each: bool = False


def _per_release(allowed: tuple[str, ...] | str) -> dict[str, tuple[str, ...]]:
    return {r: verl_names(allowed, r) if isinstance(allowed, str) else tuple(allowed)
            for r in releases.supported()}


def enum_keys(engine: str, present: set[str]) -> Iterator[EnumKey]:
    for known in ENUMS:
        yield EnumKey(engine, known.key, _per_release(known.allowed), known.nullable, known.each)
    for key in sorted(present):
        if key.endswith(".lora.type"):
            yield EnumKey(engine, key, _per_release(LORA_TYPES))
    for key, declared in declared_types(engine, releases.DEFAULT_RELEASE).items():
        literal = re.fullmatch(r'Literal\[(.*)\]', declared.text)
        if literal and key not in NOT_LISTED:
            yield EnumKey(engine, key, _per_release(tuple(re.findall(r'"([^"]*)"', literal.group(1)))))
    for role in layout.ROLES:
        if role.engine_block:
            key = f"{role.section}.strategy"
            yield EnumKey(engine, key, {r: engine_strategies(engine, r) for r in releases.supported()})


def _cases() -> list[tuple[EnumKey, str]]:
    """(key, its comment) for every enum key of every engine; a key whose comment and values are the
    same under several engines is checked under the first."""
    cases, seen = [], set()
    for engine in layout.ENGINES:
        entries = key_entries(CommandLine.parse([*engine_choice(engine)], flags=CONFIG_FLAGS))
        comments = {entry.key: entry.comment for entry in entries}
        for enum in enum_keys(engine, set(comments)):
            if enum.key not in comments:
                continue
            comment = comments[enum.key]
            if enum.key in FOLLOWS:
                assert "follows the actor" in comment, comment
                comment = comments[FOLLOWS[enum.key]]
            identity = (enum.key, comment, tuple(sorted(enum.accepted.items())))
            if identity not in seen:
                seen.add(identity)
                cases.append((enum, comment))
    return cases


CASES = _cases()


def test_every_kind_of_enum_key_is_checked():
    keys = {enum.key for enum, _ in CASES}
    assert {"algorithm.kl_penalty", f"{layout.ACTOR}.kl_loss_type", "trainer.logger",
            "actor_rollout_ref.model.lora.type", f"{layout.CRITIC}.strategy"} <= keys
    assert any(key.endswith("torchtitan.reshard_after_forward") for key in keys)


@pytest.mark.parametrize(("enum", "comment"), CASES, ids=[f"{e.engine}:{e.key}" for e, _ in CASES])
def test_the_doc_names_exactly_the_values_validation_accepts(enum: EnumKey, comment: str):
    documented = documented_choices(comment)
    assert documented is not None, f"{enum.key}: its comment names no choices: {comment!r}"
    named = set(documented) - ({"null"} if enum.nullable else set())
    every_release = set().union(*enum.accepted.values())
    assert named == every_release, (
        f"{enum.key} (model_engine={enum.engine}): named but refused by every release: "
        f"{sorted(named - every_release)}; accepted but not named: {sorted(every_release - named)}; "
        f"comment: {comment!r}"
    )
    for value in documented:
        release = next((r for r, values in enum.accepted.items() if value in values),
                       releases.DEFAULT_RELEASE)
        assert _accepted(enum, value, release), f"{enum.key}={value} is refused under verl {release}"


def _accepted(enum: EnumKey, value: str, release: str) -> bool:
    typed = f"[{value}]" if enum.each else value
    overrides = [f"model_engine={enum.engine}", f"{releases.VERSION_KEY}={release}",
                 f"{enum.key}={typed}", *ENABLE.get(enum.key, ())]
    try:
        verl_roles.compose(overrides)
    except ConfigError as error:
        return all(problem.key != enum.key for problem in error.problems)
    return True


def test_kl_estimators_as_the_docs_name_them(tmp_path):
    """`full` is no estimator verl computes: the docs do not name it, and validation refuses it."""
    listed = run_in_process(["keys", "algorithm.kl_penalty"], cwd=tmp_path, module="verl_roles.cli")
    assert listed.returncode == 0, listed.stderr
    assert "low_var_kl or k3" in listed.stdout and "verl has no `full` estimator" in listed.stdout
    assert_user_error(
        run_in_process(["show", "algorithm.kl_penalty=full", "algorithm.use_kl_in_reward=true"],
                       cwd=tmp_path, module="verl_roles.cli"),
        "algorithm.kl_penalty: is not a KL estimator", "Got 'full'",
    )
    for value in ("k3", "low_var_kl+"):
        shown = run_in_process(["show", "--keys", "algorithm.kl_penalty", f"algorithm.kl_penalty={value}",
                                "algorithm.use_kl_in_reward=true"], cwd=tmp_path, module="verl_roles.cli")
        assert shown.returncode == 0, shown.stderr
