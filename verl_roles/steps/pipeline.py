"""The one path every composed config takes, for the CLI and the Python API alike:
compose (Hydra) -> normalise legacy -> apply roles -> resolve -> validate -> write Megatron's
sequence_parallel as verl uses it -> add verl's flat LoRA keys -> write.

Hydra does the composing (the caller's job: :mod:`verl_roles.api.composition`, the main job);
:func:`finalize` runs the steps up to validation on its result. Each step that changes the unresolved config
reports what it did (:class:`~verl_roles.legacy.LegacyReport`, :class:`~verl_roles.steps.roles.RolesReport`),
which ``verl-roles explain`` reads. Validation reads resolved values (an interpolated value is checked as the
value it resolves to); nothing is written until it has passed. """

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from verl_roles import legacy
from verl_roles.base.errors import ConfigError, Problem
from verl_roles.base.layout import ENGINE_KEY, engine
from verl_roles.base.notices import InertValueWarning, warn
from verl_roles.base.releases import release_of
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.omegaconf_adapter.nodes import resolve_in_place
from verl_roles.steps import roles
from verl_roles.steps.flat_lora import FlatLoraReport, add_flat_lora_keys
from verl_roles.steps.sequence_parallel import SequenceParallelReport, write_effective_sequence_parallel
from verl_roles.validation import gate, inert, placeholders
from verl_roles.validation.rules import NOTICES, RULES, validate
from verl_roles.validation.rules.sections import section_problems
from verl_roles.validation.rules.tables import removed_checked_keys, removed_verl_keys


@dataclass(frozen=True)
class SettingsReport:
    """What the user's own settings come to: the values they set that verl would not read under the
    run's settings (:mod:`verl_roles.validation.inert`), and the paths only they can know that are still at
    their
    placeholders (:mod:`verl_roles.validation.placeholders`)."""

    inert: tuple[inert.InertValue, ...] = ()
    unset: tuple[tuple[placeholders.UserPath, object], ...] = ()
    step: ClassVar[str] = "user settings"

    def inert_keys(self) -> tuple[str, ...]:
        return tuple(value.key for value in self.inert)


StepReport = (
    legacy.LegacyReport | roles.RolesReport | SequenceParallelReport | FlatLoraReport | SettingsReport
)


@dataclass(frozen=True)
class StepInputs:
    """What the steps read besides the composed config.

    ``command`` is the command line the config was composed with (already read by
    :func:`verl_roles.legacy.read_command_line`); ``choices`` the option chosen for each config group
    (Hydra's runtime choices); ``stock_config(engine, release)`` our own config for an engine and a verl
    release with no user input
    (the legacy step compares a config file's values with it); ``file_origin(key)`` the user's file (and
    line) that set ``key``, for messages, when the caller can tell. The caller composes; no step does.
    """

    command: CommandLine
    choices: Mapping[str, str | None]
    stock_config: Callable[[str, str], DictConfig]
    file_origin: Callable[[str], str | None] | None = None
    file_keys: Callable[[], Mapping[str, str]] | None = None

    def origin_of(self, key: str) -> str:
        """Where the value of ``key`` came from: the command line, else the user's file, else ''."""
        typed = self.command.origin_of(key)
        if typed or self.file_origin is None:
            return typed
        return self.file_origin(key) or ""


def resolve(cfg: DictConfig, followed: dict[str, str] | None = None) -> DictConfig:
    """Replace every interpolation of ``cfg`` by its value, in place, and make it read-only.

    The result behaves like a config built from plain values: no struct flag, read-only. Hydra's
    ``${hydra:...}`` never resolves here, also in a process where a Hydra job ran before (the main job
    called in-process, a notebook) or is running (the caller's own Hydra app): the run's config is
    resolved before its Hydra job exists, so the verdict is the same in every process.
    """
    job = HydraConfig.instance()
    saved, job.cfg = job.cfg, None
    try:
        resolve_in_place(cfg, followed)
    finally:
        job.cfg = saved
    OmegaConf.set_struct(cfg, None)
    OmegaConf.set_readonly(cfg, True)
    return cfg


def _check_inputs(cfg: DictConfig) -> None:
    """What stops the steps before they start: a section removed or replaced by a value."""
    problems = section_problems(cfg)
    if problems:
        raise ConfigError(problems)


def _gate(resolved: DictConfig, inputs: StepInputs) -> list[Problem]:
    """The gate on what the run will use (:mod:`verl_roles.validation.gate`): its warnings now, its problems
    for the
    one report, each saying where its value came from."""
    findings = gate.task_problems(
        resolved, gate.surface(engine(resolved.get(ENGINE_KEY)).name, release_of(resolved)))
    for message in findings.warnings:
        warn(message)
    return [replace(p, origin=p.origin or inputs.origin_of(p.key)) for p in findings.problems]


def _slime_origins(roles_report: roles.RolesReport) -> dict[str, str]:
    """Each key a slime file set -> its entry and name (``roles.yaml: megatron[0] (role critic)
    exp_avg_dtype``), which a problem of the key names as where its value came from."""
    values = roles_report.slime_values
    return {value.target: f"{value.entry} {value.name}" for value in values if value.applied}


def _user_keys(inputs: StepInputs, roles_report: roles.RolesReport) -> dict[str, str]:
    """Every key the user set (the command line, a slime file, a file of their own) -> where."""
    user: dict[str, str] = {key: "command line" for key in inputs.command.set_keys()}
    for value in roles_report.slime_values:
        if value.applied:
            user.setdefault(value.target, value.entry)
    if inputs.file_keys is not None:
        for key, origin in inputs.file_keys().items():
            user.setdefault(key, origin)
    return user


def check_composition(cfg: DictConfig, inputs: StepInputs) -> DictConfig:
    """A composition read for its keys, not run (``verl-roles keys``): legacy keys read, then the gate.
    The rules do not run (they judge values, which such a view shows, not uses). Returns ``cfg``."""
    _check_inputs(cfg)
    legacy.normalize_config(cfg, inputs.command, inputs.stock_config)
    problems = _gate(cfg, inputs)
    if problems:
        raise ConfigError(problems)
    return cfg


def finalize(
    cfg: DictConfig,
    inputs: StepInputs,
    observe: Callable[[StepReport, DictConfig], None] | None = None,
) -> DictConfig:
    """Run every step after composition and return the resolved, validated, read-only config.

    Works on ``cfg`` itself (a freshly composed config nobody else holds): no copy is made.
    ``observe(report, cfg)``, when given, is called after each step that changes the config with its
    report and ``cfg`` as that step left it (unresolved, except after the last two steps, sequence_parallel
    and the flat LoRA keys, which work on the resolved config), to be read, never changed.
    """
    _check_inputs(cfg)
    legacy_report = legacy.normalize_config(cfg, inputs.command, inputs.stock_config)
    if observe is not None:
        observe(legacy_report, cfg)
    # Roles work on the unresolved config, so a value set on a role reaches what follows it (the
    # reference follows the actor's layout).
    roles_report = roles.apply_roles(cfg, inputs.command, inputs.choices)
    if observe is not None:
        observe(roles_report, cfg)
    # Rules read the resolved config: plain values are much cheaper to read than interpolations,
    # and nothing is written before finalize returns, so a problem still stops the run first.
    followed: dict[str, str] = {}
    resolved = resolve(cfg, followed)
    deleted = inputs.command.deleted_keys()
    removed = removed_checked_keys(resolved, deleted)
    for message in removed_verl_keys(resolved, deleted):
        warn(message)
    validate(
        resolved,
        RULES,
        extra=[*_gate(resolved, inputs), *roles_report.problems, *removed],
        notices=NOTICES,
        followed=followed,
        origins=_slime_origins(roles_report),
    )
    user = _user_keys(inputs, roles_report)
    settings = SettingsReport(tuple(inert.inert_values(resolved, user)),
                              tuple(placeholders.unset_paths(resolved, user)))
    for message in inert.warnings_for(settings.inert, release_of(resolved)):
        warn(message, InertValueWarning)
    if observe is not None:
        observe(settings, resolved)
    # verl's McoreEngineConfig turns sequence_parallel off at tensor parallel size 1: write that.
    sequence_parallel_report = write_effective_sequence_parallel(resolved, inputs.command, followed)
    if observe is not None:
        observe(sequence_parallel_report, resolved)
    # verl's FSDP and VeOmni engines read LoRA from flat keys: write them, derived from the block.
    flat_report = add_flat_lora_keys(resolved)
    if observe is not None:
        observe(flat_report, resolved)
    return resolved
