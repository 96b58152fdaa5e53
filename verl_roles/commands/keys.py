"""``verl-roles keys [GLOB|WORD...] [overrides...]``: the keys of the config with their type, default and
the comment written above them in the config files.

A GLOB (``*``, ``?``, ``[``) matches whole dotted keys; a key or section named in full lists it (and what
is under it); any other plain word searches: every key whose name or comment holds it. When nothing
matches, the keys nearest a plain word are suggested.

The config is composed as the main job composes it (the overrides choose the engine and role options,
which decide which keys exist and their defaults), but not finalized: the default shown is what the
config files give, an interpolation as written and what it resolves to. ``verl-roles show`` prints the
final values.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.api.composition import compose_with_choices, defaults_files, step_inputs
from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.key_docs import MountedFile, key_comments
from verl_roles.base.layout import DEFAULT_ENGINE, ENGINE_KEY
from verl_roles.base.releases import release_of
from verl_roles.commands.show import is_glob, matches, no_match
from verl_roles.inputs import paths
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.config_tree import ConfigTree
from verl_roles.inputs.flags import CONFIG_FLAGS
from verl_roles.legacy import read_command_line
from verl_roles.messages.wording import LIBRARY_ERRORS, other_release_problem, raise_translated, rerun_line
from verl_roles.omegaconf_adapter.nodes import resolve_in_place
from verl_roles.shell.command import Command, Invocation, Words
from verl_roles.steps.pipeline import check_composition
from verl_roles.upstream.passed_on import PASSED_ON
from verl_roles.validation.schema import declared_types, verl_names
from verl_roles.views.role_table import cell


def _list(invocation: Invocation) -> None:
    line = invocation.line
    patterns = [word.text for word in line.bare_words()]
    sys.stdout.write(listing(line.rewritten(lambda o: [] if o.is_bare_word else None), patterns))


COMMAND = Command(
    name="keys",
    summary="the keys matching a GLOB, or holding a WORD in their name or comment: type, default, comment",
    action=_list,
    flags=CONFIG_FLAGS,
    words=Words.KEYS,
    arguments="[GLOB|WORD...] [overrides...]",
    about="""\
List the keys of the config that match GLOB (every key without one): each with its type, its default
and the comment above it in the config files. GLOB uses * and ? as in the shell and matches the whole
dotted key; a section's name matches every key under it. A plain WORD that is no key searches: every
key whose name or comment holds it (case does not matter). Overrides choose what is composed, e.g.
model_engine=megatron for the Megatron keys, role/critic=NAME for a role option of your --config-dir.
The default is what the config files give (an interpolation as written, then its value); the final
values of a run are what `verl-roles show` prints.""",
    examples=(
        "verl-roles keys '*.optim.lr'",
        "verl-roles keys kl",
        "verl-roles keys 'megatron.*parallel*' model_engine=megatron",
        "verl-roles keys critic.megatron model_engine=megatron",
    ),
)


@dataclass(frozen=True)
class KeyEntry:
    """One key: its dotted path, declared type, default as written, resolved default and comment."""

    key: str
    type: str
    raw: object
    resolved: object
    comment: str

    def render(self) -> str:
        if self.raw is _PASSED_ON:
            return f"{self.key}: {self.type}\n    {self.comment}"
        default = cell(self.raw)
        if isinstance(self.raw, str) and "${" in self.raw and self.resolved is not _UNRESOLVED:
            default += f" ({cell(self.resolved)})"
        head = f"{self.key}: {self.type} = {default}"
        return f"{head}\n    {self.comment}" if self.comment else head


_UNRESOLVED = object()
# The "default" of the entry standing for the other keys of a section verl passes on to a library.
_PASSED_ON = object()


def key_entries(command: CommandLine) -> list[KeyEntry]:
    """Every key of the composition of ``command``, in config order."""
    command = read_command_line(command).command
    config_dir = command.config_dir_path()
    try:
        cfg, choices = compose_with_choices(command.config_name, command.texts(), config_dir)
        check_composition(cfg, step_inputs(command, choices))
        files = defaults_files(command.config_name, command.texts(), config_dir)
    except (ConfigError, *LIBRARY_ERRORS) as error:
        raise_translated(error, command)
    comments = key_comments(_mounted(files, command.tree))
    types = declared_types(str(cfg.get(ENGINE_KEY, DEFAULT_ENGINE)), release_of(cfg))
    container = OmegaConf.to_container(cfg, resolve=False)
    resolved = _resolved_copy(cfg)
    entries = []
    for path, raw in paths.leaves(container):
        key = paths.dotted(path)
        declared = types.get(key)
        entries.append(
            KeyEntry(
                key=key,
                type=declared.text if declared is not None else _type_name(raw),
                raw=raw,
                resolved=_resolved(cfg if resolved is None else resolved, key),
                comment=comments.get(key, ""),
            )
        )
    return _with_passed_on(entries, release_of(cfg))


def _with_passed_on(entries: list[KeyEntry], release: str) -> list[KeyEntry]:
    """``entries`` with, after the last key of each section verl passes on to another library, one entry
    ``SECTION.*`` saying which other keys it takes (verl_roles/upstream/passed_on.py)."""
    out = list(entries)
    for row in PASSED_ON:
        under = [i for i, e in enumerate(out) if e.key == row.section or e.key.startswith(f"{row.section}.")]
        if not under:
            continue
        accepted = verl_names(row.parameters, release) if row.parameters else ()
        what = row.call.partition("(")[0]
        comment = (f"verl {release} passes this section to {row.library} as {row.call} "
                   f"({row.verl_source.partition(':')[0]}). ")
        comment += (f"Any other key {what} takes may be added with +KEY=VALUE; another is refused. "
                    f"{what} takes: {', '.join(accepted)}." if accepted else
                    f"Any other key may be added with +KEY=VALUE and is passed on unchecked ({row.library} "
                    "reads it).")
        if any(out[i].key != row.section for i in under):
            comment += " A key listed above keeps its type."
        entry = KeyEntry(key=f"{row.section}.*", type=f"passed on to {row.library}", raw=_PASSED_ON,
                         resolved=_PASSED_ON, comment=comment)
        out.insert(under[-1] + 1, entry)
    return out


def _mounted(files: Sequence[tuple[str, str]], tree: ConfigTree) -> list[MountedFile]:
    """Each file of the defaults list on disk, found as Hydra finds it (the first directory of the
    search path that has it: the shipped tree, then --config-dir)."""
    mounted = []
    for config_path, package in files:
        for directory in tree.directories:
            candidate = Path(directory) / f"{config_path}.yaml"
            if candidate.is_file():
                mounted.append(MountedFile(candidate, package))
                break
    return mounted


def _type_name(value: object) -> str:
    if value is None:
        return "Any"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(
        type(value), type(value).__name__
    )


def _resolved_copy(cfg: DictConfig) -> DictConfig | None:
    """A copy of ``cfg`` with every interpolation resolved at once, as the pipeline resolves (plain
    references copied without OmegaConf's grammar, ~10x faster than selecting each key), or None when
    one cannot resolve yet (each key is then resolved on its own, and such a one shows as written)."""
    try:
        return resolve_in_place(copy.deepcopy(cfg))
    except Exception:  # noqa: BLE001 - any failure: the per-key way below says which keys resolve
        return None


def _resolved(cfg: DictConfig, key: str) -> object:
    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=False)
    except Exception:  # noqa: BLE001 - an interpolation that cannot resolve yet shows as written
        return _UNRESOLVED
    if isinstance(value, DictConfig | ListConfig):
        return OmegaConf.to_container(value, resolve=True)
    return value


def listing(command: CommandLine, patterns: Sequence[str]) -> str:
    """The text ``verl-roles keys`` prints: the entries matching any of ``patterns``, one block each, in
    config order (every entry without a pattern)."""
    entries = key_entries(command)
    if patterns:
        # Whether a plain word names a key is a question about every entry: asked once per pattern.
        named = {p: _names_a_key(p, entries) for p in patterns if not is_glob(p)}
        chosen = [e for e in entries if any(_selects(e, p, named.get(p, True)) for p in patterns)]
        if not chosen:
            raise other_releases(command, patterns) or no_match(
                " ".join(patterns), [e.key for e in entries], patterns,
                "a plain word that is no key searches the names and comments; an engine's keys "
                "exist only with it (add model_engine=megatron)")
        entries = chosen
    return "".join(entry.render() + "\n" for entry in entries)


def other_releases(command: CommandLine, patterns: Sequence[str]) -> ConfigError | None:
    """Patterns that match no key of the release ``command`` composes but keys of another release (or name a
    key it renamed): which releases have them, and the same command on one of them; None when no release
    has any."""
    rerun = rerun_line("keys", command)
    release = command.release()
    problems = []
    for pattern in patterns:
        if not is_glob(pattern):
            problem = other_release_problem(pattern, command, rerun)
            problems += [] if problem is None else [problem]
            continue
        others = [r for r in releases.supported() if r != release and any(
            matches(key, pattern) for key in releases.surface(r))]
        if others:
            named = " and ".join(f"verl {r}" for r in others)
            problems.append(Problem(
                key=pattern, message=f"matches keys of {named}, none of verl {release}, the release of this "
                "config", fix=f"`{rerun(pattern, others[-1], None)}` lists verl {others[-1]}'s"))
    return ConfigError(problems) if len(problems) == len(patterns) else None


def _selects(entry: KeyEntry, pattern: str, names_a_key: bool) -> bool:
    """A GLOB, or a key or section named in full (``names_a_key``), matches the key (and those under
    it); any other plain word is a search: the key's name or its comment holds it (case does not
    matter)."""
    if names_a_key:
        return matches(entry.key, pattern)
    word = pattern.casefold()
    return word in entry.key.casefold() or word in entry.comment.casefold()


def _names_a_key(pattern: str, entries: Sequence[KeyEntry]) -> bool:
    return any(matches(e.key, pattern) for e in entries)
