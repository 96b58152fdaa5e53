"""``verl-roles explain KEY [overrides...]``: the resolved value of KEY and every step that produced it.

Hydra merges the files of the defaults list in order, then applies the command-line overrides.
We ask Hydra for that same defaults list, load each file at its package exactly as Hydra does, and
record every file that sets KEY (or a section holding it); then the command-line overrides; then,
when the value is an interpolation, the same story for each key it refers to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.types import OverrideType
from hydra.types import RunMode
from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.cli_errors import run_reporting_errors
from verl_roles.errors import ConfigError, Problem
from verl_roles.hydra_context import compose_raw, isolated_hydra
from verl_roles.hydra_errors import LIBRARY_ERRORS, CommandLine, KeyKnowledge, raise_translated
from verl_roles.legacy import migrate_overrides
from verl_roles.pipeline import PRIMARY_CONFIG

_REFERENCE = re.compile(r"\$\{([^${}:]+)\}")
_ABSENT = object()


@dataclass
class Step:
    """One place that set the key: where, how, and the raw (unresolved) value it wrote."""

    source: str
    raw: object


@dataclass
class Explanation:
    key: str
    value: object
    steps: list[Step]
    references: list[Explanation] = field(default_factory=list)

    def render(self, indent: str = "") -> str:
        lines = [f"{indent}{self.key} = {_show(self.value)}"]
        for number, step in enumerate(self.steps, 1):
            lines.append(f"{indent}  {number}. {step.source}: {_show(step.raw)}")
        for reference in self.references:
            lines.append(f"{indent}  which follows ${{{reference.key}}}:")
            lines.append(reference.render(indent + "    "))
        return "\n".join(lines)


def _show(value: object) -> str:
    if isinstance(value, DictConfig | ListConfig):
        value = OmegaConf.to_container(value, resolve=False)
    return "null" if value is None else repr(value) if isinstance(value, str) and not value else str(value)


def explain(key: str, overrides: Sequence[str] = (), config_name: str = PRIMARY_CONFIG) -> Explanation:
    """Where the value of ``key`` comes from, for the config composed from ``overrides``."""
    return explain_many([key], overrides, config_name)[0]


def explain_many(
    keys: Sequence[str], overrides: Sequence[str] = (), config_name: str = PRIMARY_CONFIG
) -> list[Explanation]:
    """:func:`explain` for several keys of one composition (the files are loaded once)."""
    # Legacy keys are read as their current keys before composing, as the main job does; the
    # chain names the legacy spelling the user typed.
    overrides, translations = migrate_overrides(overrides)
    aliases = {t.new_token: t.old_token for t in translations}
    command = CommandLine(config_name, list(overrides))
    try:
        composed = compose_raw(config_name, overrides)
        layers = _layers(config_name, list(overrides))
    except LIBRARY_ERRORS as error:
        raise_translated(error, command)
    unknown = [key for key in keys if _raw_at(composed, key) is _ABSENT]
    if unknown:
        knowledge = KeyKnowledge(command)
        problems = []
        for key in unknown:
            guess = knowledge.closest(key)
            fix = f"did you mean `{guess}`?" if guess else "check the spelling"
            problems.append(Problem(key=key, message="is not a key of the composed config", fix=fix))
        raise ConfigError(problems)
    return [_explain(key, composed, layers, command, aliases, seen=set()) for key in keys]


def _explain(key: str, composed: DictConfig, layers: list[tuple[str, DictConfig]], command: CommandLine,
             aliases: dict[str, str], seen: set[str]) -> Explanation:
    steps = [Step(source, raw) for source, cfg in layers if (raw := _raw_at(cfg, key)) is not _ABSENT]
    steps += _command_line_steps(key, command, aliases)
    raw = _raw_at(composed, key)
    try:
        value = OmegaConf.select(composed, key, throw_on_missing=False)
    except Exception as error:  # noqa: BLE001 - show what resolution says instead of a value
        value = f"<cannot resolve: {error}>"
    explanation = Explanation(key=key, value=value, steps=steps)
    if key not in seen:
        for target in _references(composed, key):
            if _raw_at(composed, target) is not _ABSENT:
                explanation.references.append(
                    _explain(target, composed, layers, command, aliases, seen | {key})
                )
    return explanation


def _references(composed: DictConfig, key: str) -> list[str]:
    """The keys an interpolation at ``key`` (or at a section holding it) refers to."""
    parts = key.split(".")
    for depth in range(1, len(parts) + 1):
        prefix = ".".join(parts[:depth])
        raw = _raw_at(composed, prefix)
        if isinstance(raw, str) and "${" in raw:
            rest = parts[depth:]
            targets = [_absolute(t, prefix) for t in _REFERENCE.findall(raw)]
            return [".".join([t, *rest]) for t in targets] if rest else targets
    return []


def _absolute(reference: str, key: str) -> str:
    """Turn a relative interpolation (``${..x}``) into an absolute key."""
    if not reference.startswith("."):
        return reference
    dots = len(reference) - len(reference.lstrip("."))
    parent = key.split(".")[: -dots] if dots else key.split(".")
    return ".".join([*parent, reference.lstrip(".")])


def _layers(config_name: str, overrides: list[str]) -> list[tuple[str, DictConfig]]:
    """Each file of the defaults list, in merge order, loaded at its package: (description, config)."""
    with isolated_hydra():
        loader = GlobalHydra.instance().config_loader()
        _, repo = loader._parse_overrides_and_create_caching_repo(config_name, overrides)  # type: ignore[attr-defined]
        defaults = loader.compute_defaults_list(config_name, overrides, RunMode.RUN)
        layers = []
        for default in defaults.defaults:
            if default.config_path is None or default.config_path.startswith("hydra/"):
                continue
            loaded = loader._load_single_config(default=default, repo=repo)  # type: ignore[attr-defined]
            layers.append((_describe(default.config_path, default.package), loaded.config))
    return layers


def _describe(config_path: str, package: str | None) -> str:
    where = f"{config_path}.yaml"
    group, _, option = config_path.rpartition("/")
    if group.startswith("role/"):
        how = f"role option {group}={option}"
    elif group == "model_engine":
        how = f"engine option model_engine={option}"
    else:
        how = ""
    mounted = f"at {package}" if package else "at the top level"
    return f"{where} ({how + ', ' if how else ''}{mounted})"


def _command_line_steps(key: str, command: CommandLine, aliases: dict[str, str]) -> list[Step]:
    steps = []
    for override in command.parsed:
        target = override.key_or_group
        if override.type == OverrideType.DEL or not (key == target or key.startswith(target + ".")):
            continue
        typed = override.input_line
        source = f"command line `{typed}`"
        if typed in aliases:
            source = f"command line `{aliases[typed]}` (legacy key, read as `{typed}`)"
        if override.is_sweep_override():
            steps.append(Step(f"{source} (a sweep)", override.value()))
            continue
        value = OmegaConf.create({"v": override.value()})
        raw = _raw_at(value, "v" + key[len(target):])
        if raw is not _ABSENT:
            steps.append(Step(source, raw))
    return steps


def _raw_at(cfg: DictConfig, key: str) -> object:
    """The raw value at ``key`` (interpolations left as written), or ``_ABSENT``.

    A section set to an interpolation (``mtp: ${actor_rollout_ref.model.mtp}``) is reported at the
    section: the raw value of ``...mtp.enable`` is then the interpolation of ``...mtp`` plus the rest.
    """
    node: object = cfg
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(node, DictConfig) or node._is_none() or node._is_missing():
            return _ABSENT
        if node._is_interpolation():
            return _ABSENT
        child = node._get_node(part, validate_access=False)
        if child is None:
            return _ABSENT
        if child._is_interpolation() and i < len(parts) - 1:
            raw = child._value()
            return f"{raw} (then .{'.'.join(parts[i + 1:])})"
        node = child
    if isinstance(node, DictConfig | ListConfig):
        if node._is_interpolation() or node._is_missing() or node._is_none():
            return node._value()
        return OmegaConf.to_container(node, resolve=False)
    return node._value()  # type: ignore[union-attr]


USAGE = """usage: verl-roles explain KEY [--config-name NAME] [OVERRIDES...]

Print the resolved value of KEY and every step that produced it: each config file (relative to
conf/) that set it, in merge order, with the role or engine option that mounted it; the command-line
override; and, for an interpolation, the same for every key it refers to.

example: verl-roles explain critic.megatron.tensor_model_parallel_size model_engine=megatron"""


def run(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    key, rest = args[0], list(args[1:])
    config_name = PRIMARY_CONFIG
    for flag in ("--config-name", "-cn"):
        if flag in rest:
            at = rest.index(flag)
            config_name = rest[at + 1] if at + 1 < len(rest) else PRIMARY_CONFIG
            del rest[at : at + 2]

    def action() -> None:
        print(explain(key, [r for r in rest if r != "--debug"], config_name).render())

    return run_reporting_errors(action, rest)
