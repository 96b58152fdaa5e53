"""The rule runner: every rule runs on the resolved config, and all problems are reported together.

A rule is a function ``(cfg) -> Iterable[Problem]``; a notice is a function ``(cfg) -> Iterable[str]``
whose messages are warnings (the config is valid, but something deserves the user's attention). Both
read the config; they never change it. :data:`verl_roles.validation.rules.RULES` and
:data:`verl_roles.validation.rules.NOTICES` list every one the main job runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from omegaconf import DictConfig, OmegaConf

from verl_roles.base.errors import ConfigError, Problem, config_files_origin
from verl_roles.base.layout import ROLE_SECTIONS
from verl_roles.base.notices import warn

Rule = Callable[[DictConfig], Iterable[Problem]]
Notice = Callable[[DictConfig], Iterable[str]]


def collect_problems(cfg: DictConfig, rules: Sequence[Rule]) -> list[Problem]:
    """Run every rule and return all the problems found, in rule order."""
    problems: list[Problem] = []
    for check in rules:
        problems.extend(check(cfg))
    return problems


def validate(
    cfg: DictConfig,
    rules: Sequence[Rule],
    extra: Iterable[Problem] = (),
    notices: Sequence[Notice] = (),
    followed: Mapping[str, str] | None = None,
    origins: Mapping[str, str] | None = None,
) -> None:
    """Warn with every notice's messages, then raise :class:`ConfigError` listing every problem
    (``extra`` ones found by earlier steps first), or return when the config is valid.

    ``followed`` (key -> the key its value was a plain reference to, from resolution) lets a problem
    be reported where the value was set: the same problem at every role block that follows one baseline
    key is one problem at that key (see :func:`at_the_key_set`). ``origins`` (key -> where its value came
    from, such as a slime file's entry) names the origin of a problem no step named.
    """
    for check in notices:
        for message in check(cfg):
            warn(message)
    problems = [*extra, *collect_problems(cfg, rules)]
    if problems:
        problems = at_the_key_set(problems, followed or {})
        known = origins or {}
        raise ConfigError([
            _with_file_origin(cfg, replace(problem, origin=problem.origin or known.get(problem.key, "")))
            for problem in problems
        ])


def source_of(key: str, followed: Mapping[str, str]) -> str:
    """The key ``key``'s value was set at: its reference followed to the end (a role block's leaf to
    the engine baseline, the ref's to the actor's)."""
    seen = {key}
    while key in followed and followed[key] not in seen:
        key = followed[key]
        seen.add(key)
    return key


def _roles_named(keys: Sequence[str]) -> str:
    """`actor, ref and critic` for keys inside those roles' sections (the keys themselves otherwise)."""
    names = []
    for key in keys:
        role = next((name for name, section in ROLE_SECTIONS.items() if key.startswith(section + ".")), key)
        names.append(role)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _shape(problem: Problem, followed: Mapping[str, str]) -> tuple[object, ...]:
    """What makes two problems the same problem once reported at their source key (the key's own name
    in the wording does not)."""
    source = source_of(problem.key, followed)
    own = problem.key
    return (
        source,
        problem.message.replace(own, source),
        problem.fix.replace(own, source),
        problem.expected,
        repr(problem.value),
        problem.show_value,
    )


def at_the_key_set(problems: Sequence[Problem], followed: Mapping[str, str]) -> list[Problem]:
    """Problems at keys whose values follow another key, reported at the key that was set.

    Problems with the same wording at keys that all follow one source key (``TP*PP*CP = 3*1*1 ...`` at
    the actor's, the ref's and the critic's ``megatron.tensor_model_parallel_size``, all following
    ``megatron.tensor_model_parallel_size=3``) become one problem at the source, saying which roles
    follow it; one at the source itself absorbs them. A lone problem at a follower stays at its key.
    """
    groups: dict[tuple[object, ...], list[Problem]] = {}
    for problem in problems:
        groups.setdefault(_shape(problem, followed), []).append(problem)
    merged: list[Problem] = []
    done: set[int] = set()
    for problem in problems:
        if id(problem) in done:
            continue
        group = groups[_shape(problem, followed)]
        done.update(id(p) for p in group)
        source = source_of(problem.key, followed)
        followers = [p.key for p in group if p.key != source]
        if not followers:
            merged.append(problem)
        elif len(group) == 1:
            # One role's value: keep the key, and say where its value was set.
            merged.append(replace(problem, origin=problem.origin or f"`{source}`, which this key follows"))
        else:
            follow = f"{_roles_named(followers)} follow{'s' if len(followers) == 1 else ''} this value"
            message = f"{problem.message.rstrip().rstrip('.')}; {follow}"
            own = problem.key
            merged.append(replace(problem, key=source, message=message.replace(own, source),
                                  fix=problem.fix.replace(own, source)))
    return merged


def _with_file_origin(cfg: DictConfig, problem: Problem) -> Problem:
    """A problem about a config key says where its value came from; the command line, when it set the
    key, is filled in later (``wording.with_origins``), the config files otherwise."""
    if problem.origin or OmegaConf.select(cfg, problem.key, default=_ABSENT) is _ABSENT:
        return problem
    return replace(problem, origin=config_files_origin(problem.key))


_ABSENT = object()

