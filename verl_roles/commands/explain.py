"""``verl-roles explain KEY [overrides...]``: the value of KEY the main job would write, and every step
that produced it.

Hydra merges the files of the defaults list in order, then applies the command-line overrides.
We ask Hydra for that same defaults list, load each file at its package exactly as Hydra does
(:func:`verl_roles.api.composition.defaults_layers`), and record every file that sets KEY (or a
section holding it); then the command-line overrides. Then the composed config goes through the real
:func:`verl_roles.steps.pipeline.finalize`, whose steps report what they did (a legacy key moved out of a
config file, a value of the slime file named by ``megatron_config_path``, a role resource key
dropped) and show us the config after each step. The value shown is finalize's result. When the
value is an interpolation, the same story is told for each key it refers to.
"""

from __future__ import annotations

import pickle
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from omegaconf import DictConfig, OmegaConf

from verl_roles.api.composition import (
    compose_with_choices,
    composed_key_paths,
    defaults_layers,
    step_inputs,
)
from verl_roles.base import releases
from verl_roles.base.errors import ConfigError, Problem, counted, unknown_key
from verl_roles.base.layout import DEFAULT_ENGINE, ENGINE_ALIASES, ENGINE_KEY, PRIMARY_CONFIG, ROLE_GROUPS
from verl_roles.commands.explain_model import (
    REMOVED,
    Explanation,
    Layer,
    Step,
    Unresolvable,
    UserDir,
)
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.flags import CONFIG_FLAGS
from verl_roles.legacy import LegacyReport, old_key_label, read_command_line
from verl_roles.messages.wording import (
    LIBRARY_ERRORS,
    KeyKnowledge,
    other_release_problem,
    raise_translated,
    rerun_line,
    translate,
)
from verl_roles.omegaconf_adapter.nodes import ABSENT, interpolation_on_the_way, raw_at
from verl_roles.shell.command import Command, Invocation, Words, parse
from verl_roles.shell.reporting import say
from verl_roles.steps.flat_lora import FlatLoraReport
from verl_roles.steps.pipeline import SettingsReport, StepInputs, StepReport, finalize
from verl_roles.steps.roles import RolesReport
from verl_roles.steps.sequence_parallel import TURNED_OFF, SequenceParallelReport
from verl_roles.upstream.passed_on import passed_on
from verl_roles.validation.schema import verl_names

_REFERENCE = re.compile(r"\$\{([^${}:]+)\}")
# Steps that work on the resolved config, where every interpolation "changed": only their own events count.
RESOLVED_STEPS = frozenset({SequenceParallelReport.step, FlatLoraReport.step, SettingsReport.step})


def explain(
    key: str, overrides: Sequence[str] = (), config_name: str = PRIMARY_CONFIG, config_dir: str | None = None
) -> Explanation:
    """Where the value of ``key`` comes from, for the config composed from ``overrides``.

    ``config_name`` and ``config_dir`` mean what ``--config-name`` and ``--config-dir`` mean for the
    main job. A config the main job would refuse is still explained: see :attr:`Explanation.invalid`.
    """
    return explain_many([key], overrides, config_name, config_dir)[0]


def explain_many(
    keys: Sequence[str],
    overrides: Sequence[str] = (),
    config_name: str = PRIMARY_CONFIG,
    config_dir: str | None = None,
) -> list[Explanation]:
    """:func:`explain` for several keys of one composition (the files are loaded once)."""
    # Legacy keys are read as their current keys before composing, as the main job does; the
    # chain names the legacy spelling the user typed.
    translated = read_command_line(CommandLine.of(overrides, config_name, config_dir))
    command = translated.command
    aliases = {t.new_token: t.old_token for t in translated.translations}
    dir_path = command.config_dir_path()
    user_dir = UserDir.of(config_dir, dir_path) if config_dir is not None and dir_path is not None else None
    try:
        composed, choices = compose_with_choices(command.config_name, command.texts(), dir_path)
        layers = _layers(command, user_dir)
    except LIBRARY_ERRORS as error:
        raise_translated(error, command, composed_key_paths)
    run = _Pipeline.through_finalize(composed, layers, step_inputs(command, choices))
    unknown = [key for key in keys if not run.knows(key)]
    if unknown:
        knowledge = KeyKnowledge(command, composed_key_paths)
        problems = []
        for key in unknown:
            problems.append(_unknown_key(key, command, knowledge))
        raise ConfigError(problems)
    return [_explain(key, run, aliases) for key in keys]


def _unknown_key(key: str, command: CommandLine, knowledge: KeyKnowledge) -> Problem:
    """A KEY the composed config does not have: one of another engine, or a misspelling."""
    engine = knowledge.only_under(key)
    if engine is None:
        release_problem = other_release_problem(key, command, rerun_line("explain", command))
        if release_problem is not None:
            return release_problem
    section, _, name = key.rpartition(".")
    handed = passed_on(section)
    if engine is None and handed is not None:
        accepted = verl_names(handed.parameters, knowledge.release) if handed.parameters else ()
        if not accepted or name in accepted:
            return Problem(
                key=key,
                message=f"is not set: verl passes `{section}` to {handed.library} as {handed.call}, and no "
                f"config file or override sets `{name}` there, so {handed.library}'s own default applies",
                fix=f"set it with +{key}=VALUE to pass it on; `verl-roles keys '{section}.*'` says what "
                "the section takes",
            )
    if engine is None:
        return unknown_key(key, "the composed config", guesses=knowledge.suggestions(key),
                           fix="`verl-roles keys` lists the keys")
    how = (
        f"replace model_engine={knowledge.engine} with model_engine={engine}"
        if command.chose(ENGINE_KEY) else f"add model_engine={engine}"
    )
    return Problem(
        key=key,
        message=f"exists under model_engine={engine}; this explains the config composed with "
        f"model_engine={knowledge.engine}",
        fix=f"{how}: `verl-roles explain {key} model_engine={engine}`",
    )


@dataclass(frozen=True)
class _Event:
    """Something a pipeline step did, to the keys in ``paths``."""

    stage: str
    paths: tuple[str, ...]
    source: str


@dataclass
class _Pipeline:
    """The composed config taken through the real ``finalize``: the config after each step
    (``stages``), what each step reported (``events``), and the result or the error it stopped with."""

    layers: list[Layer]
    command: CommandLine
    stages: list[tuple[str, DictConfig]]
    final: DictConfig | None
    error: ConfigError | None
    events: list[_Event] = field(default_factory=list)
    # A derived key -> the key it was derived from (verl's flat LoRA keys), told as a reference.
    derived_from: dict[str, str] = field(default_factory=dict)

    @classmethod
    def through_finalize(cls, composed: DictConfig, layers: list[Layer], inputs: StepInputs) -> _Pipeline:
        stages = [("composed", _copy(composed))]
        reports: list[StepReport] = []

        def observe(report: StepReport, cfg: DictConfig) -> None:
            reports.append(report)
            stages.append((report.step, _copy(cfg)))

        final, error = None, None
        try:
            final = finalize(composed, inputs, observe)
        except (ConfigError, *LIBRARY_ERRORS) as raised:
            error = translate(raised, inputs.command, composed_key_paths)
        pipeline = cls(layers, inputs.command, stages, final, error)
        pipeline.events = [event for report in reports for event in pipeline.events_of(report)]
        pipeline.derived_from = {
            derived.flat_key: derived.block_key
            for report in reports
            if isinstance(report, FlatLoraReport)
            for derived in report.derived
        }
        return pipeline

    @property
    def latest(self) -> DictConfig:
        """The unresolved config as the last step that ran left it (the last steps see it resolved)."""
        return next(cfg for stage, cfg in reversed(self.stages) if stage not in RESOLVED_STEPS)

    def knows(self, key: str) -> bool:
        return any(raw_at(cfg, key) is not ABSENT for _, cfg in self.stages)

    def value(self, key: str) -> object:
        """finalize's value of ``key``; for an invalid config, the value as far as finalize got."""
        cfg = self.latest if self.final is None else self.final
        if raw_at(cfg, key) is ABSENT:
            return REMOVED
        try:
            return OmegaConf.select(cfg, key, throw_on_missing=False)
        except Exception as error:  # noqa: BLE001 - show what resolution says instead of a value
            return Unresolvable(str(error))

    def events_of(self, report: StepReport) -> list[_Event]:
        """What a step's report says it did, worded for the chain."""
        if isinstance(report, LegacyReport):
            events = []
            for move in report.moves:
                old, new, where = move.old_key, move.new_key, self._file_setting(move.old_key)
                if move.dropped:
                    # The command line sets the new key: the file's legacy value is dropped, not moved.
                    events.append(_Event(report.step, (old,), f"{old_key_label(old)} {old}{where} dropped: "
                                         f"the command line sets {new}"))
                else:
                    label = old_key_label(old)
                    events.append(_Event(report.step, (old, new), f"{label} {old} -> {new}{where}"))
            return events
        if isinstance(report, SequenceParallelReport):
            return [
                _Event(report.step, (entry.key,), f"{TURNED_OFF}; {entry.tensor_parallel_key} is 1")
                for entry in report.turned_off
            ]
        if isinstance(report, FlatLoraReport):
            return [
                _Event(report.step, (derived.flat_key,),
                       f"verl's flat LoRA key, derived from {derived.block_key} (verl reads both)")
                for derived in report.derived
            ]
        if isinstance(report, SettingsReport):
            return [
                _Event(report.step, (value.key,),
                       f"verl would not read it: here {value.setting}, and {value.row.reason}")
                for value in report.inert
            ]
        assert isinstance(report, RolesReport)
        events = [
            _Event(report.step, (value.target,), f"{value.entry} overrides.{value.name}"
                   + (f" ({value.converted})" if value.converted else ""))
            for value in report.slime_values
            if value.applied
        ]
        events += [
            _Event(
                report.step,
                (dropped.key,),
                f"roles step: dropped {dropped.key} (a role does not choose its resources; they follow "
                "trainer.nnodes and trainer.n_gpus_per_node)",
            )
            for dropped in report.dropped
        ]
        events += [
            _Event(
                report.step,
                (key,),
                f"roles step: follows {key.replace('critic.', 'actor_rollout_ref.actor.', 1)} "
                "(shared placement: the critic takes the actor's parallel layout where it sets none)",
            )
            for key in report.followed
        ]
        return events

    def _file_setting(self, key: str) -> str:
        files = [layer.file for layer in self.layers if raw_at(layer.cfg, key) is not ABSENT]
        return f" (from {files[-1]})" if files else ""

    def steps(self, key: str) -> list[Step]:
        """What the pipeline steps did to ``key``; each step shows the raw value the step left."""
        steps = []
        for (_, before), (stage, after) in zip(self.stages, self.stages[1:], strict=False):
            raw = raw_at(after, key)
            raw = REMOVED if raw is ABSENT else raw
            sources = [
                _event_source(event, key)
                for event in self.events
                if event.stage == stage and any(_related(key, path) for path in event.paths)
            ]
            changed = stage not in RESOLVED_STEPS and raw_at(before, key) != raw_at(after, key)
            if not sources and changed:
                sources = [f"pipeline step `{stage}`"]
            steps += [Step(source, raw) for source in sources]
        return steps


def _event_source(event: _Event, key: str) -> str:
    """An event's source; for a section holding the key the event set, which key that was."""
    if key in event.paths or len(event.paths) > 1:
        return event.source
    return f"{event.source} (sets {event.paths[0]})"


def _copy(cfg: DictConfig) -> DictConfig:
    return pickle.loads(pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL))  # noqa: S301 - our own bytes


def _related(key: str, path: str) -> bool:
    """True when ``key`` is ``path``, inside it, or a section holding it."""
    return key == path or key.startswith(path + ".") or path.startswith(key + ".")


def _explain(key: str, run: _Pipeline, aliases: dict[str, str]) -> Explanation:
    """``key``'s explanation and, under it, each key its value follows (an interpolation, a derived value),
    explained the same way; a key already on the way down is shown once more but not followed again.

    Walked with a stack of its own, not Python's: a chain of references as long as the main job resolves
    (thousands of links) is explained too, as every other command accepts it."""
    root = _explained(key, run, aliases)
    on_the_way: set[str] = set()
    # (key, its explanation) to follow, or (key, None): the walk below `key` is done.
    stack: list[tuple[str, Explanation | None]] = [(key, root)]
    while stack:
        current, explanation = stack.pop()
        if explanation is None:
            on_the_way.discard(current)
            continue
        if current in on_the_way:
            continue
        derived = [run.derived_from[current]] if current in run.derived_from else []
        targets = [t for t in [*_references(run.latest, current), *derived]
                   if raw_at(run.latest, t) is not ABSENT]
        explanation.references.extend(_explained(target, run, aliases) for target in targets)
        on_the_way.add(current)
        stack.append((current, None))
        stack.extend(zip(reversed(targets), reversed(explanation.references), strict=True))
    return root


def _explained(key: str, run: _Pipeline, aliases: dict[str, str]) -> Explanation:
    """``key``'s own explanation: its value and each place that set it (without what it follows)."""
    steps = [
        Step(layer.source_of(key), raw)
        for layer in run.layers if (raw := raw_at(layer.cfg, key)) is not ABSENT
    ]
    steps += _command_line_steps(key, run.command, aliases)
    steps += run.steps(key)
    return Explanation(key=key, value=run.value(key), steps=steps, invalid=run.error)


def _references(composed: DictConfig, key: str) -> list[str]:
    """The keys an interpolation at ``key`` (or at a section holding it) refers to."""
    found = interpolation_on_the_way(composed, key)
    if found is None:
        return []
    prefix, raw = found
    rest = key.split(".")[prefix.count(".") + 1:]
    targets = [_absolute(t, prefix) for t in _REFERENCE.findall(raw)]
    return [".".join([t, *rest]) for t in targets] if rest else targets


def _absolute(reference: str, key: str) -> str:
    """Turn a relative interpolation (``${..x}``) into an absolute key."""
    if not reference.startswith("."):
        return reference
    dots = len(reference) - len(reference.lstrip("."))
    parent = key.split(".")[: -dots] if dots else key.split(".")
    return ".".join([*parent, reference.lstrip(".")])


def _layers(command: CommandLine, user_dir: UserDir | None) -> list[Layer]:
    """Each file of the defaults list, in merge order, loaded at its package; a user's file is named
    relative to its ``--config-dir``, prefixed with the directory as typed."""
    layers = []
    loaded_files = defaults_layers(command.config_name, command.texts(), user_dir.path if user_dir else None)
    release = command.release()
    engines = [ENGINE_ALIASES.get(name, name) for d in loaded_files
               for group, _, name in [d.config_path.rpartition("/")] if group == ENGINE_KEY]
    engine = engines[-1] if engines else DEFAULT_ENGINE
    changed = releases.layer(release, engine)["set"]
    for loaded in loaded_files:
        file = f"{loaded.config_path}.yaml"
        ours = user_dir is None or loaded.source != user_dir.url
        if not ours:
            file = f"{user_dir.typed}: {file}"
        notes = {}
        if ours and loaded.config_path == f"{releases.VERSION_KEY}/{release}":
            notes = {key: f"a key of verl {release} that conf/ does not write ({releases.choice(release)})"
                     for key in releases.layer(release, engine)["add"]}
        elif ours:
            notes = {key: f"verl {release}'s default ({releases.choice(release)}; conf/ writes another)"
                     for key in changed if raw_at(loaded.config, key) is not ABSENT}
        layers.append(Layer(file, _describe(file, loaded.config_path, loaded.package), loaded.config, notes))
    return layers


def _describe(file: str, config_path: str, package: str | None) -> str:
    group, _, option = config_path.rpartition("/")
    if group in ROLE_GROUPS.values():
        how = f"role option {group}={option}"
    elif group == ENGINE_KEY:
        how = f"engine option {ENGINE_KEY}={option}"
    else:
        how = ""
    mounted = f"at {package}" if package else "at the top level"
    return f"{file} ({how + ', ' if how else ''}{mounted})"


def _command_line_steps(key: str, command: CommandLine, aliases: dict[str, str]) -> list[Step]:
    steps = []
    for override in command.task_overrides:
        target = override.key
        if override.is_delete or not (key == target or key.startswith(target + ".")):
            continue
        typed = override.text
        source = f"command line `{typed}`"
        if typed in aliases:
            label = old_key_label(aliases[typed].partition("=")[0].lstrip("+~"))
            source = f"command line `{aliases[typed]}` ({label}, read as `{typed}`)"
        if override.is_sweep:
            steps.append(Step(f"{source} (a sweep)", override.value()))
            continue
        value = OmegaConf.create({"v": override.value()})
        raw = raw_at(value, "v" + key[len(target):])
        if raw is not ABSENT:
            steps.append(Step(source, raw))
    return steps


def parse_args(args: Sequence[str]) -> tuple[str | None, list[str], dict[str, str]]:
    """(KEY, overrides, {"config_name"|"config_dir": value}) of an explain command line; the flags may
    come anywhere, as ``--flag VALUE`` or ``--flag=VALUE``. KEY is the first argument that is a bare
    key (no ``=``)."""
    return _arguments(parse(COMMAND, args).line)


def _arguments(command: CommandLine) -> tuple[str | None, list[str], dict[str, str]]:
    options = {}
    if command.config_name_typed is not None:
        options["config_name"] = command.config_name_typed
    if command.config_dir is not None:
        options["config_dir"] = command.config_dir
    bare = command.bare_words()
    key = bare[0].text if bare else None
    rest = [o.text for o in command.overrides if not (bare and o is bare[0])]
    return key, rest, options


def _invalid_line(error: ConfigError) -> str:
    first = error.problems[0]
    more = len(error.problems) - 1
    also = f" (and {counted(more, 'more problem')})" if more else ""
    return (
        f"verl_roles error: this config is invalid, the main job would stop on it: {first.key}: "
        f"{first.message}{also}. Run `python -m verl_roles.main` with the same arguments for every "
        "problem and its fix."
    )


def _explain_command(invocation: Invocation) -> int:
    key, rest, options = _arguments(invocation.line)
    if key is None:
        raise ConfigError([Problem(key="KEY", message="no key to explain",
                                   fix="write e.g. `verl-roles explain trainer.nnodes`")])
    explained = explain(key, rest, **options)
    say(explained.render())
    if explained.invalid is not None:
        print(" ".join(_invalid_line(explained.invalid).split()), file=sys.stderr)
        return 2
    return 0


COMMAND = Command(
    name="explain",
    summary="a key's value and every file, role and override that set it",
    action=_explain_command,
    flags=CONFIG_FLAGS,
    words=Words.KEYS,
    arguments="KEY [overrides...]",
    about="""\
Print the value of KEY the main job would write and every step that produced it: each config file
(relative to conf/, or to your --config-dir, named first) that set it, in merge order, with the role
or engine option that mounted it; the command-line override; what the main job did after composing
(a legacy key moved out of a config file, a value from the megatron_config_path slime file, a role
resource key dropped); and, for an interpolation, the same for every key it refers to.
--config-dir and --config-name mean what they mean for `python -m verl_roles.main`.

If the main job would refuse the config, the chain is still printed (with the value as far as the
main job got), followed by one line on stderr saying why; the exit code is then 2.""",
    examples=("verl-roles explain critic.megatron.tensor_model_parallel_size model_engine=megatron",),
)
