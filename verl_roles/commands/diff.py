"""``verl-roles diff [A] -- [B]``: which resolved values differ between two compositions.

Each side is a list of Hydra overrides, optionally with ``--config-name NAME``; an empty side is the
default config. Both sides are composed, validated and resolved exactly as the main job does, then
compared leaf by leaf (a list is one leaf). Every differing key is printed on one line, sorted by key
path: ``added`` (only in B), ``removed`` (only in A), ``renamed`` (a key of A's verl release that B's
release spells another way, with its value) or ``changed`` (A's value -> B's value); values are shown
in JSON/YAML flow style. Exit codes follow diff(1): 0 same, 1 different, 2 a user error.

Against stock verl: ``verl-roles diff --stock [OVERRIDES]`` compares the one config of OVERRIDES with
verl's own defaults for the same engine and release (the config verl_roles composes from nothing but
``model_engine`` and ``verl_version``, which is verl's composed config but for the deliberate differences
of :mod:`verl_roles.upstream.verl_differences`): exactly what this launch changes from stock verl. A key verl
has no such key for (verl_roles' engine baseline, a ``+`` key) is marked so.

A verl upgrade: a side that is nothing but a release choice (``verl_version=0.8.0``) takes the other
side's overrides too (a key the two releases name differently under its own release's name, as
``verl-roles migrate`` writes it), so ``verl-roles diff verl_version=0.8.0 -- verl_version=0.9.1
OVERRIDES`` lists what moving that one config from verl 0.8.0 to 0.9.1 changes. Between two releases
the lines are grouped, each group headed with its count: renamed, removed, added, then changed (``Default
changed`` when both sides hold the same overrides).

Limits, typed anywhere on the line: ``--keys GLOB`` (repeatable) keeps the keys matching one of the
globs (or under a section named in full), ``--set`` the keys the overrides set (under either name of a
renamed key); a line ``only: ...`` says so, and "same" (exit 0) then means the same among those keys.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from verl_roles.api.composition import compose
from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem, counted, one_paragraph
from verl_roles.base.layout import DEFAULT_ENGINE, ENGINE_KEY
from verl_roles.commands.show import matches
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import CONFIG_FLAGS, REQUIRED, FlagSpec
from verl_roles.inputs.paths import leaves
from verl_roles.legacy import LEGACY_KEYS, find, renamed_between
from verl_roles.omegaconf_adapter.yaml_dialect import dump_flow
from verl_roles.shell.command import WIDTH, Command, Invocation, Words
from verl_roles.shell.reporting import report, say
from verl_roles.upstream.verl_differences import deliberate, reason_for

EXIT_SAME = 0
EXIT_DIFFERENT = 1
STOCK_FLAG = "--stock"
STOCK = FlagSpec((STOCK_FLAG,),
                 help="compare the one config of the overrides with stock verl (same engine and release)")
KEYS_FLAG, SET_FLAG = "--keys", "--set"
KEYS = FlagSpec((KEYS_FLAG,), REQUIRED, value_name="a key pattern", metavar="GLOB", repeatable=True,
                help="only the keys matching GLOB (or under a section named in full); may be repeated")
SET = FlagSpec((SET_FLAG,), help="only the keys the overrides set (under either name of a renamed key)")

# The groups of a diff between two releases, in the order printed: kind -> heading.
GROUPS = {"renamed": "Renamed", "removed": "Removed", "added": "Added", "changed": "Changed"}

_MISSING = object()


@dataclass(frozen=True)
class Side:
    """One side of the diff: its command line (``--config-name``, ``--config-dir`` and overrides)."""

    label: str
    command: CommandLine

    def describe(self) -> str:
        return " ".join(self.command.argv()) or "(defaults)"


@dataclass(frozen=True)
class Change:
    """One key whose resolved value differs; ``kind`` is added, removed or changed."""

    key: str
    kind: str
    old: object = None
    new: object = None
    new_key: str = ""

    def render(self) -> str:
        if self.kind == "renamed":
            return f"renamed {self.key} -> {self.new_key}: {format_value(self.new)}"
        if self.kind == "added":
            return f"added   {self.key}: {format_value(self.new)}"
        if self.kind == "removed":
            return f"removed {self.key}: {format_value(self.old)}"
        return f"changed {self.key}: {format_value(self.old)} -> {format_value(self.new)}"


def format_value(value: object) -> str:
    """A resolved value as resolved.yaml spells it, in flow style: null, true, 1.0e-06, fsdp, '1e-5' (a
    string), [console, wandb], {}."""
    return dump_flow(value)


def compare(
    a: Mapping[str, object], b: Mapping[str, object], renames: Mapping[str, str] | None = None
) -> list[Change]:
    """The differing leaves of two plain containers, sorted by key path. ``renames`` (A's key -> B's)
    pairs a key only A has with the key only B has that spells it, when their values agree."""
    old = dict(leaves(a))
    new = dict(leaves(b))
    changes = []
    for path in sorted(old.keys() | new.keys()):
        before, after = old.get(path, _MISSING), new.get(path, _MISSING)
        key = ".".join(path)
        if before is _MISSING:
            changes.append(Change(key, "added", new=after))
        elif after is _MISSING:
            changes.append(Change(key, "removed", old=before))
        elif before != after or type(before) is not type(after):
            changes.append(Change(key, "changed", old=before, new=after))
    removed = {c.key: c for c in changes if c.kind == "removed"}
    added = {c.key: c for c in changes if c.kind == "added"}
    for old_key, new_key in (renames or {}).items():
        if old_key in removed and new_key in added and removed[old_key].old == added[new_key].new:
            changes.remove(removed[old_key])
            changes.remove(added[new_key])
            changes.append(Change(old_key, "renamed", old=removed[old_key].old, new=added[new_key].new,
                                  new_key=new_key))
    return sorted(changes, key=lambda c: c.key.split("."))


def parse_side(label: str, args: Sequence[str]) -> Side:
    """One side's command line; only ``--config-name`` and ``--config-dir`` are options of a side."""
    command = CommandLine.parse(args, flags=CONFIG_FLAGS)
    problems = command.flag_problems("diff")
    if problems:
        raise ConfigError([replace(problem, key=f"{problem.key} on side {label}") for problem in problems])
    return Side(label, command)


def _usage_error(message: str) -> ConfigError:
    return ConfigError(
        [Problem(key="verl-roles diff", message=message, fix="see `verl-roles diff --help`")]
    )


def compose_side(side: Side) -> dict[str, object]:
    """The resolved config of one side as a plain container; errors name the side."""
    try:
        command = side.command
        cfg = compose(command.texts(), command.config_name, command.config_dir)
    except (ConfigError, HydraException, OmegaConfBaseException) as error:
        raise ConfigError(
            [Problem(key=f"side {side.label} ({side.describe()})", message=one_paragraph(report(error)))]
        ) from error
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def render(a: Side, b: Side, changes: Sequence[Change], same_overrides: bool = False, only: str = "") -> str:
    """The report printed on stdout. Between two releases the lines are grouped: renamed, removed, added,
    then changed (``default changed`` when a side took the other's overrides: only the releases differ).
    ``only`` says what the lines are limited to (``--keys``, ``--set``)."""
    upgrade = a.command.release() != b.command.release()
    lines = [f"{side.label}: {side.describe()}" + (f"  (verl {side.command.release()})" if upgrade else "")
             for side in (a, b)]
    if only:
        lines.append(f"only: {only}")
    if not changes:
        lines.append("same: every resolved value of A and B is equal" + (" among those keys" if only else ""))
        return "\n".join(lines)
    if upgrade:
        for kind, heading in GROUPS.items():
            group = [change for change in changes if change.kind == kind]
            if group:
                title = "Default changed" if kind == "changed" and same_overrides else heading
                lines.append(f"{title} ({len(group)}):")
                lines.extend(change.render() for change in group)
    else:
        lines.extend(change.render() for change in changes)
    lines.append(tally(changes))
    return "\n".join(lines)


def key_count(n: int) -> str:
    """``1 key differs``, ``2 keys differ``: the one wording of a count of differing keys."""
    return f"{counted(n, 'key')} {'differs' if n == 1 else 'differ'}"


def tally(changes: Sequence[Change], against: str = "") -> str:
    """The closing line: how many keys differ (``against`` what, when said), by kind."""
    kinds = ("added", "removed", "renamed", "changed")
    counts = {kind: sum(c.kind == kind for c in changes) for kind in kinds}
    return (
        f"{key_count(len(changes))}{against}: {counts['added']} added, {counts['removed']} removed, "
        + (f"{counts['renamed']} renamed, " if counts["renamed"] else "") + f"{counts['changed']} changed"
    )


# --- against stock verl ---------------------------------------------------------------------------


def stock_side(engine: str, release: str) -> Side:
    """verl's own defaults for ``engine`` and ``release``, as verl_roles composes them."""
    overrides = [f"{ENGINE_KEY}={engine}", releases.choice(release)]
    return Side("stock", CommandLine.parse(overrides, flags=CONFIG_FLAGS))


def render_stock(launch: Side, engine: str, release: str, changes: Sequence[Change],
                 resolved: Mapping[str, object]) -> str:
    """The report of ``diff --stock``: each key this launch changes from stock verl, marked where verl
    has no such key; then what is not listed and why."""
    lines = [f"stock: verl {release}'s defaults under {ENGINE_KEY}={engine}",
             f"launch: {launch.describe()}"]
    for change in changes:
        line = change.render()
        if not releases.has_key(release, change.key):
            line += f"  (verl {release} has no such key)"
        lines.append(line)
    against = f" from stock verl {release}"
    values = {".".join(path): value for path, value in leaves(resolved)}
    changed = {change.key for change in changes}
    apart = sorted(key for key in values if deliberate(key, engine) and key not in changed)
    ours = sum(not releases.has_key(release, key) for key in values)
    if changes:
        lines.append(tally(changes, against))
    else:
        beyond = " beyond verl_roles' own defaults listed below" if apart else ""
        lines.append(f"same: this launch changes no key{against}{beyond}")
    if apart:
        lines.append(f"verl_roles' defaults that differ from stock verl {release} on purpose "
                     f"({counted(len(apart), 'key')}), each with its reason:")
        for key in apart:
            lines.append(f"  {key}: {dump_flow(values[key])}")
            lines += textwrap.wrap(str(reason_for(key, engine)), WIDTH, initial_indent="      ",
                                   subsequent_indent="      ", break_on_hyphens=False, break_long_words=False)
    lines.append(f"not listed: {counted(ours, 'key')} of verl_roles' own layer (the engine baseline, ...) "
                 "this launch leaves as they are")
    return "\n".join(lines)


def _diff_stock(args: list[str]) -> int:
    if "--" in args:
        raise _usage_error(
            f"{STOCK_FLAG} compares one config with stock verl: drop the `--` and give that config's "
            f"overrides, e.g. `verl-roles diff {STOCK_FLAG} model_engine=megatron`"
        )
    launch = parse_side("launch", args)
    resolved = compose_side(launch)
    engine = str(resolved.get(ENGINE_KEY) or DEFAULT_ENGINE)
    release = releases.release_of(resolved)
    stock = compose_side(stock_side(engine, release))
    changes = compare(stock, resolved)
    say(render_stock(launch, engine, release, changes, resolved))
    return EXIT_DIFFERENT if changes else EXIT_SAME


def _limits(args: list[str]) -> tuple[list[str], list[str], bool]:
    """``args`` without diff's own limits, wherever they were typed (either side), the ``--keys`` patterns
    and whether ``--set`` was given."""
    rest: list[str] = []
    patterns: list[str] = []
    only_set = False
    tokens = iter(args)
    for token in tokens:
        if token == SET_FLAG:
            only_set = True
        elif token == KEYS_FLAG:
            pattern = next(tokens, None)
            if pattern is None or pattern == "--":
                raise _usage_error(
                    f"{KEYS_FLAG} needs a key pattern, e.g. `{KEYS_FLAG} 'actor_rollout_ref.actor.*'`")
            patterns.append(pattern)
        elif token.startswith(f"{KEYS_FLAG}="):
            patterns.append(token.partition("=")[2])
        else:
            rest.append(token)
    return rest, patterns, only_set


def set_keys(*sides: Side) -> set[str]:
    """The keys the overrides of ``sides`` set or delete, each also as its side's release reads it (a legacy
    key) and as the other releases name it (a renamed key)."""
    found: set[str] = set()
    for side in sides:
        release = side.command.release()
        for override in side.command.key_overrides():
            found.add(override.key)
            hit = find(override.key, release)
            if hit is not None:
                found.add(hit[1])
            for other in (s.command.release() for s in sides):
                renamed = renamed_between(override.key, release, other)
                if renamed is not None:
                    found.add(renamed[1])
    return found


def limited(changes: Sequence[Change], patterns: Sequence[str], keys: set[str] | None) -> list[Change]:
    """The changes whose key (or its new name) matches one of ``patterns`` (all without any), and, with
    ``keys``, is one of them or lies under one."""

    def names(change: Change) -> list[str]:
        return [change.key, *([change.new_key] if change.new_key else [])]

    def under(name: str) -> bool:
        return keys is None or any(name == key or name.startswith(key + ".") for key in keys)

    return [c for c in changes
            if any(under(name) and (not patterns or any(matches(name, p) for p in patterns))
                   for name in names(c))]


def _only(patterns: Sequence[str], only_set: bool) -> str:
    said = [f"keys matching {' or '.join(patterns)}"] if patterns else []
    return " and ".join([*said, *(["keys the overrides set"] if only_set else [])])


def _diff(invocation: Invocation) -> int:
    args, patterns, only_set = _limits(list(invocation.args))
    if STOCK_FLAG in args:
        if patterns or only_set:
            raise _usage_error(
                f"{KEYS_FLAG} and {SET_FLAG} limit a diff of two configs (A -- B), not {STOCK_FLAG}")
        return _diff_stock([arg for arg in args if arg != STOCK_FLAG])
    if "--" not in args:
        raise _usage_error(
            "separate the overrides of A and B with `--`, e.g. `verl-roles diff -- model_engine=megatron`, "
            f"or compare one config with stock verl: `verl-roles diff {STOCK_FLAG} OVERRIDES`"
        )
    if args.count("--") > 1:
        raise _usage_error(
            f"write one `--` between the overrides of A and those of B (found {args.count('--')})"
        )
    split = args.index("--")
    a_args, b_args = borrowed(args[:split], args[split + 1 :])
    a = parse_side("A", a_args)
    b = parse_side("B", b_args)
    changes = compare(compose_side(a), compose_side(b), renames(a.command.release(), b.command.release()))
    if patterns or only_set:
        changes = limited(changes, patterns, set_keys(a, b) if only_set else None)
    # A side that only chooses a release: both sides hold the same overrides, what changed is a default.
    same_overrides = _only_a_release(args[:split]) or _only_a_release(args[split + 1:])
    say(render(a, b, changes, same_overrides, _only(patterns, only_set)))
    return EXIT_DIFFERENT if changes else EXIT_SAME


def _only_a_release(args: Sequence[str]) -> bool:
    command = CommandLine.parse(args, flags=CONFIG_FLAGS)
    return bool(args) and not command.flags and all(
        o.is_group and o.key == releases.VERSION_KEY for o in command.overrides)


def borrowed(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    """The two sides, a side that only chooses a verl release taking the other side's overrides, each key
    under the name that release gives it (a renamed key, as ``verl-roles migrate`` writes it)."""
    if _only_a_release(a) and not _only_a_release(b):
        return [*_taken(b, a), *a], b
    if _only_a_release(b) and not _only_a_release(a):
        return a, [*_taken(a, b), *b]
    return a, b


def _taken(given: list[str], choosing: list[str]) -> list[str]:
    """The overrides of ``given`` (its release choice left out) for the release ``choosing`` picks."""
    source = CommandLine.parse(given, flags=CONFIG_FLAGS)
    old, new = source.release(), CommandLine.parse(choosing, flags=CONFIG_FLAGS).release()
    rest = [t for t in given if not (t.startswith(f"{releases.VERSION_KEY}=") and "," not in t)]

    def spelled(token: str) -> str:
        override = next((o for o in source.key_overrides() if o.text == token), None)
        hit = None if override is None else renamed_between(override.key, old, new)
        if override is None or hit is None or override.package is not None:
            return token
        value = override.value_text
        return f"{override.prefix}{hit[1]}" + ("" if value is None else f"={value}")

    return [spelled(token) for token in rest]


def renames(old: str, new: str) -> dict[str, str]:
    """Keys of verl ``old`` that ``new`` spells another way, in either direction (the legacy table read
    by :func:`verl_roles.legacy.renamed_between`, as ``verl-roles migrate`` reads it)."""
    found = {}
    for entry in LEGACY_KEYS:
        for key in () if entry.section else (entry.old, entry.new):
            hit = renamed_between(key, old, new)
            if hit is not None:
                found[key] = hit[1]
    return found


# The upgrade the help shows: from the release before the default to the default.
_UPGRADE = (
    f"{releases.VERSION_KEY}={releases.previous(releases.DEFAULT_RELEASE)} -- "
    f"{releases.VERSION_KEY}={releases.DEFAULT_RELEASE}"
)

COMMAND = Command(
    name="diff",
    summary="the resolved keys that differ between two compositions (diff [A] -- [B]), or from stock verl "
    "(diff --stock [overrides])",
    action=_diff,
    # Each side reads its own flags (--config-name, --config-dir) and overrides.
    words=Words.OWN,
    flags=(STOCK, KEYS, SET),
    passes=CONFIG_FLAGS,
    usage=(
        "[--config-name NAME] [--config-dir DIR] [A overrides...] -- [B: the same] [--keys GLOB]... [--set]",
        f"{STOCK_FLAG} [--config-name NAME] [--config-dir DIR] [overrides...]",
    ),
    about=f"""\
Compose config A and config B (Hydra overrides; an empty side is the default config) and print
every resolved key whose value differs: `added` (only in B), `removed` (only in A), `changed`
(A -> B), `renamed` (a key B's verl release spells another way). A side that only chooses a verl release
takes the other side's overrides, so
  verl-roles diff {_UPGRADE} OVERRIDES
lists what that verl upgrade changes in that config, grouped: renamed, removed, added, default changed.
--keys GLOB (repeatable) limits the lines to the keys matching GLOB (or under a section named in full),
--set to the keys the overrides set (under either name of a renamed key).
With --stock, compare one config with verl's own defaults for the same engine and verl release: every
key whose value this launch changes from stock verl (`changed`), adds (`added`) or removes (`removed`),
marked where verl has no such key (verl_roles' engine baseline, a `+` key). Exit code 0 when they are
the same, 1 when they differ, 2 on an error.""",
    passes_note="--config-name and --config-dir may be given on either side, for that side.",
    examples=(
        "verl-roles diff -- model_engine=megatron",
        "verl-roles diff model_engine=megatron -- model_engine=megatron "
        "megatron.tensor_model_parallel_size=2",
        "verl-roles diff model_engine=megatron -- --config-name ppo_megatron_trainer",
        f"verl-roles diff {_UPGRADE} model_engine=megatron",
        f"verl-roles diff {_UPGRADE} --keys 'actor_rollout_ref.actor.*'",
        f"verl-roles diff {STOCK_FLAG} model_engine=megatron actor_rollout_ref.actor.optim.lr=3e-6",
    ),
)


if __name__ == "__main__":
    sys.exit(COMMAND.run(sys.argv[1:]))
