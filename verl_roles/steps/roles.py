"""Apply roles: the step between composition and validation that settles what each role gets.

Precedence, lowest first (docs/roles.md says the same):

1. the engine baseline, top-level ``megatron.*`` / ``fsdp.*`` (from the engine files or the command
   line), which every role's block follows leaf by leaf;
2. the stock per-role values (``conf/critic/stock.yaml``), then the ``role/actor`` and ``role/critic``
   group options (several stack in the order listed; each changes only the keys it sets);
3. the slime file named by ``megatron_config_path`` (slime: role YAML on top of the common baseline);
4. per-role keys typed on the command line (``critic.optim.lr=2e-5``): the command line has the last
   word, so a sweep over a role key works with a slime file too (a warning names each file value it
   replaces).

This step also drops resource keys from roles (placement follows ``trainer.*``), warns about critic
overrides when the algorithm trains no critic (verl ignores them), catches a role option file without
its package header, and, with ``actor_critic_same_topology`` on, makes the critic follow the actor's
Megatron parallel layout wherever the critic's own is not set; it reports what it did
(:class:`RolesReport`). The actor/critic topology rule (an explicit mismatch is an error) is
:mod:`verl_roles.validation.rules.topology`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.layout import (
    ENGINE_KEY,
    ROLE_GROUPS,
    ROLE_SECTIONS,
    SLIME_ENGINE,
    SLIME_ROLES,
    TOPOLOGY_SETTING,
    Engine,
    engine,
)
from verl_roles.base.notices import ConfigTranslationWarning, warn
from verl_roles.base.releases import release_of
from verl_roles.inputs import paths
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.slime import schedule
from verl_roles.slime.names import (
    KEYS_BY_NAME,
    RESOURCE_KEYS,
    SECTION_PATHS,
    SLIME_PATH_KEY,
    followed_role_key,
)
from verl_roles.slime.read import RoleEntry, read_slime_file, role_assignments
from verl_roles.upstream import passed_on
from verl_roles.validation.rules.values import critic_in_use

# The one command-line key under `critic` that is a switch, not a critic override.
CRITIC_SWITCH = "critic.enable"


@dataclass(frozen=True)
class RoleSources:
    """What the user asked for besides config files: the command line and the option chosen for each
    config group (Hydra's runtime choices)."""

    command: CommandLine
    choices: Mapping[str, str | None]

    def options(self, group: str) -> tuple[str, ...]:
        """The options chosen for ``group``, in the order they apply. A list typed on the command line
        (``role/critic=[offload,fast]``, options stacked) is not among Hydra's runtime choices, so
        it is read from the command line."""
        chosen = self.choices.get(group)
        if chosen is not None:
            return (str(chosen),)
        for override in reversed(self.command.group_overrides()):
            if override.key != group or override.is_sweep or override.is_delete:
                continue
            value = override.value()
            return tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)
        return ()

    def cli_keys(self) -> list[str]:
        """The dotted config keys the command line sets or deletes (group choices excluded)."""
        return self.command.touched_keys()

    def cli_value(self, key: str) -> str:
        override = self.command.override_for(key)
        if override is None or override.key != key:
            return ""
        return override.value_text or ""


@dataclass(frozen=True)
class SlimeValue:
    """A value of the slime file: its entry (``FILE: megatron[i] (role R)``), slime key, the config key
    it sets and its value; not ``applied`` when the command line sets that key and wins; ``converted``
    says how the file's value was turned into verl's unit (a count of optimizer steps)."""

    entry: str
    name: str
    target: str
    value: Any
    applied: bool
    converted: str = ""


@dataclass(frozen=True)
class DroppedResource:
    """A resource key (``num_nodes``...) a role set, removed from the config."""

    key: str
    value: Any


@dataclass(frozen=True)
class RolesReport:
    """What the roles step did, and the problems it found that are reported with validation.

    ``followed`` are the critic's topology keys set to follow the actor's (shared placement)."""

    slime_values: tuple[SlimeValue, ...] = ()
    dropped: tuple[DroppedResource, ...] = ()
    problems: tuple[Problem, ...] = ()
    followed: tuple[str, ...] = ()
    step: ClassVar[str] = "roles"


def apply_roles(cfg: DictConfig, command: CommandLine, choices: Mapping[str, str | None]) -> RolesReport:
    """Apply the per-role settings to ``cfg`` in place and say what was done.

    Mistakes that make the rest meaningless (a role option without its package header, any mistake
    in the slime file) raise :class:`ConfigError` before ``cfg`` changes. (Critic settings the algorithm
    never uses are named later, with every other value verl would not read:
    :mod:`verl_roles.validation.inert`.)
    """
    sources = RoleSources(command, choices)
    _check_misplaced_role_node(cfg, sources)
    path = cfg.get(SLIME_PATH_KEY)
    entries = _read_slime(cfg, path) if path is not None else []
    dropped = _drop_role_resources(cfg, sources)
    for entry in entries:
        if entry.ignored:
            warn(
                f"{entry.label(path)} sets {', '.join(entry.ignored)}; ignored: a role does not choose its "
                "resources, they follow trainer.nnodes and trainer.n_gpus_per_node. Remove the key(s)."
            )
    slime_values = _apply_slime(cfg, path, entries, sources)
    followed = _critic_follows_actor_layout(cfg)
    return RolesReport(slime_values, dropped, followed=followed)


def _check_misplaced_role_node(cfg: DictConfig, sources: RoleSources) -> None:
    """An option file without ``# @package <section>`` lands at top-level ``role.<name>`` (Hydra's
    default package for a group); nothing would read it there, so say which header line is missing."""
    if "role" not in cfg:
        return
    problems = []
    for name, node in cfg.role.items():
        group = f"role/{name}"
        section = ROLE_SECTIONS.get(str(name))
        keys = ", ".join(str(k) for k in node) if isinstance(node, DictConfig) else repr(node)
        if section is None or group not in ROLE_GROUPS.values():
            problems.append(
                Problem(
                    key=f"role.{name}",
                    message=f"top-level `role.{name}` ({keys}) is not a role of this config",
                    fix=f"per-role options live in the groups {', '.join(ROLE_GROUPS.values())}",
                )
            )
            continue
        option = (sources.options(group) or ("NAME",))[-1]
        problems.append(
            Problem(
                key=f"role.{name}",
                message=(
                    f"the keys of option {group}={option} ({keys}) landed under a top-level "
                    f"`role.{name}` node "
                    f"instead of in `{section}`: the option file has no package header, so nothing would "
                    "read them"
                ),
                fix=f"make `# @package {section}` the first line of {group}/{option}.yaml "
                "in your --config-dir",
            )
        )
    raise ConfigError(problems)


def _read_slime(cfg: DictConfig, path: Any) -> list[RoleEntry]:
    """The checked entries of the slime file at ``path``; its warnings (what nothing reads) are told."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(
            [
                Problem(
                    key=SLIME_PATH_KEY,
                    message="must be the path of a YAML file or null",
                    value=path,
                    show_value=True,
                    fix=f"write {SLIME_PATH_KEY}=/path/to/roles.yaml (one file), or {SLIME_PATH_KEY}=null",
                )
            ]
        )
    if engine(cfg.get(ENGINE_KEY)) != SLIME_ENGINE:
        raise ConfigError(
            [
                Problem(
                    key=SLIME_PATH_KEY,
                    message=f"slime's per-role files are {SLIME_ENGINE.name}-only (their keys are Megatron "
                    f"argparse names for the `{SLIME_ENGINE.role_block}` blocks), but the config was "
                    f"composed with {ENGINE_KEY}={cfg.get(ENGINE_KEY)}",
                    fix=f"add {ENGINE_KEY}={SLIME_ENGINE.name}, or drop {SLIME_PATH_KEY}",
                )
            ]
        )
    file = read_slime_file(path, release_of(cfg))
    for note in file.notes:
        warn(note)
    return file.entries


def _origin(sources: RoleSources, role: str, key: str) -> str:
    if key in sources.cli_keys():
        return "the command line"
    options = sources.options(ROLE_GROUPS[role])
    if options:
        return f"{_typed_options(ROLE_GROUPS[role], options)} or the config files"
    return "the config files"


def _typed_options(group: str, options: Sequence[str]) -> str:
    """``role/critic=NAME``, or ``role/critic=[A,B]`` for stacked options, as typed."""
    return f"{group}={options[0]}" if len(options) == 1 else f"{group}=[{','.join(options)}]"


def _drop_role_resources(cfg: DictConfig, sources: RoleSources) -> tuple[DroppedResource, ...]:
    """``num_nodes`` / ``num_gpus_per_node`` in a role are ignored (with a warning) and removed, so that
    nothing downstream reads them: resource placement follows ``trainer.*``."""
    dropped: list[DroppedResource] = []
    for role in ROLE_GROUPS:
        section = ROLE_SECTIONS[role]
        node = OmegaConf.select(cfg, section)
        found = [key for key in RESOURCE_KEYS if key in node]
        if not found:
            continue
        dropped += [DroppedResource(f"{section}.{key}", node[key]) for key in found]
        shown = ", ".join(f"{section}.{key}={node[key]}" for key in found)
        origins = sorted({_origin(sources, role, f"{section}.{key}") for key in found})
        warn(
            f"{shown} (from {' and '.join(origins)}) ignored: a role does not choose its resources, they "
            "follow trainer.nnodes and trainer.n_gpus_per_node. Remove the key(s) from the role."
        )
        with open_dict(node):
            for key in found:
                del node[key]
    return tuple(dropped)


def _cli_key_covering(sources: RoleSources, path: str) -> str | None:
    for key in sources.cli_keys():
        if path == key or path.startswith(key + "."):
            return key
    return None


def _in_verl_units(
    cfg: DictConfig, path: str, entry: RoleEntry, name: str, value: Any, problems: list[Problem],
    notes: list[str],
) -> tuple[Any, str]:
    """The file's ``value`` of slime ``name`` in the unit of the verl key it sets, and how it was
    converted: a count of optimizer steps becomes trainer steps (:mod:`verl_roles.slime.schedule`; a
    count with no equal is a problem, a conversion a note)."""
    spec = KEYS_BY_NAME.get(name)
    if spec is None or not spec.counts_optimizer_steps:
        return value, ""
    try:
        steps, how = schedule.to_trainer_steps(cfg, entry.role, name, spec.path, value)
    except schedule.ScheduleError as error:
        problems.append(Problem(key=f"{entry.label(path)} {name}", message=str(error), fix=error.fix))
        return value, ""
    if how:
        target = f"{ROLE_SECTIONS[entry.role]}.{spec.path}"
        notes.append(f"{entry.label(path)} {name}={value}: {how}; set {target}={steps}, since verl steps the "
                     "learning-rate scheduler once per trainer step.")
    return steps, how


def _apply_slime(
    cfg: DictConfig, path: str, entries: Sequence[RoleEntry], sources: RoleSources
) -> tuple[SlimeValue, ...]:
    """Set what the file gives each role (the command line's per-role keys win); every value is checked,
    and converted to verl's unit, before the first one is set."""
    planned: list[tuple[RoleEntry, str, str, Any, str | None, str]] = []
    problems: list[Problem] = []
    notes: list[str] = []
    for entry, name, target, value in role_assignments(entries):
        covering = _cli_key_covering(sources, target)
        how = ""
        if covering is None:
            value, how = _in_verl_units(cfg, path, entry, name, value, problems, notes)
        planned.append((entry, name, target, value, covering, how))
    if problems:
        raise ConfigError(problems)
    for note in notes:
        warn(note, ConfigTranslationWarning)
    _followers_keep_their_value(cfg, {plan[2] for plan in planned if plan[4] is None})
    values: list[SlimeValue] = []
    for entry, name, target, value, covering, how in planned:
        if covering is not None:
            warn(
                f"{target}: the command line ({covering}={sources.cli_value(covering)}) wins over "
                f"{entry.label(path)} {name}={value!r}; per-role command-line keys have the last word."
            )
        else:
            # A key of a mapping verl passes on (optim.override_optimizer_config) is added there.
            paths.assign(cfg, target, value, add=passed_on.inside(target) is not None)
        values.append(
            SlimeValue(entry.label(path), name, target, value, applied=covering is None, converted=how))
    return tuple(values)


def _followers_keep_their_value(cfg: DictConfig, targets: set[str]) -> None:
    """A key of a role's own section that follows another role's key (the critic's ``use_dynamic_bsz:
    ${actor_rollout_ref.actor.use_dynamic_bsz}``) keeps the value it has without the file when the file
    sets the followed key and not the follower: in slime, what one role's entry sets never reaches the
    other role, which keeps the common baseline. Said with a warning, since verl alone would follow."""
    for role in SLIME_ROLES:
        if role == "critic" and not critic_in_use(cfg):
            continue  # verl reads no critic key then
        section = ROLE_SECTIONS[role]
        raw = OmegaConf.to_container(OmegaConf.select(cfg, section), resolve=False)
        for key in SECTION_PATHS:
            followed = followed_role_key(raw.get(key))
            follower = f"{section}.{key}"
            if followed is None or follower in targets:
                continue
            leader = f"{ROLE_SECTIONS[followed[0]]}.{followed[1]}"
            if leader not in targets:
                continue
            value = OmegaConf.select(cfg, follower)
            paths.assign(cfg, follower, value)
            shown = str(value).lower() if isinstance(value, bool) else repr(value)
            warn(f"{follower} keeps {shown}, its value without the slime file, which sets {leader} in the "
                 f"{followed[0]}'s entry only: in slime a role's entry reaches no other role, while verl "
                 f"alone would make {follower} follow {leader}. Set it in the {role}'s entry (or on the "
                 "command line) to choose it.")


def _follows_notice(chosen: Engine, actor: DictConfig, critic_block: str, followed: list[str]) -> str:
    """What the critic following the actor's layout means, offering only the choices the rules allow: a
    size of the process's parallel state (Megatron-Core's) is the actor's in the critic too, whatever is
    set (verl builds the critic in the actor's worker processes: the topology and parallel-state rules
    refuse any other value); another topology key may keep the baseline with the shared placement off."""
    shown = ", ".join(f"{key}={chosen.effective_value(actor, key)}" for key in followed)
    fixed = [key for key in followed if key in chosen.process_state]
    free = [key for key in followed if key not in chosen.process_state]
    text = (f"{critic_block} follows the actor's parallel layout ({shown}), since {TOPOLOGY_SETTING}=true "
            f"and the critic sets none of its own; verl alone would give the critic the common baseline "
            f"({chosen.baseline}.*).")
    if fixed:
        text += (" verl builds the critic in the actor's worker processes, where the parallel state is set "
                 f"once, so {', '.join(fixed)} cannot differ between them; to change "
                 f"{'it' if len(fixed) == 1 else 'them'} for both, set {chosen.baseline}.<key> once for "
                 "every role.")
    if free:
        text += (f" To keep the baseline's {', '.join(free)} for the critic, set {TOPOLOGY_SETTING}=false.")
    return text


def _critic_follows_actor_layout(cfg: DictConfig) -> tuple[str, ...]:
    """With a shared placement, the critic takes the actor's parallel layout, as the reference does,
    for every topology key the critic does not set itself (it still follows the engine baseline there,
    ``${megatron.<key>}``) while the actor sets its own. An explicit critic value is kept, and the
    topology rule compares it. Returns the critic keys now following the actor's."""
    chosen = engine(cfg.get(ENGINE_KEY))
    if cfg.get(TOPOLOGY_SETTING) is not True or not chosen.topology or not critic_in_use(cfg):
        return ()
    actor_block = f"{ROLE_SECTIONS['actor']}.{chosen.block('actor')}"
    critic_block = f"{ROLE_SECTIONS['critic']}.{chosen.block('critic')}"
    actor, critic = OmegaConf.select(cfg, actor_block), OmegaConf.select(cfg, critic_block)
    raw_actor = OmegaConf.to_container(actor, resolve=False)
    raw_critic = OmegaConf.to_container(critic, resolve=False)
    followed = []
    for key in chosen.topology:
        baseline = "${" + f"{chosen.baseline}.{key}" + "}"
        if raw_critic.get(key) != baseline or raw_actor.get(key) == baseline:
            continue
        critic[key] = "${" + f"{actor_block}.{key}" + "}"
        followed.append(key)
    if followed:
        warn(_follows_notice(chosen, actor, critic_block, followed))
    return tuple(f"{critic_block}.{key}" for key in followed)
