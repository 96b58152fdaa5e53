"""Validation: every rule runs on the composed config and all problems are reported together.

A rule is a function ``(cfg) -> Iterable[Problem]`` registered with :func:`rule`. Rules read the
config; they never change it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from omegaconf import DictConfig, OmegaConf

from verl_roles.errors import ConfigError, Problem

Rule = Callable[[DictConfig], Iterable[Problem]]

RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    """Register ``fn`` as a validation rule."""
    RULES.append(fn)
    return fn


def collect_problems(cfg: DictConfig) -> list[Problem]:
    """Run every rule and return all the problems found, in rule order."""
    problems: list[Problem] = []
    for check in RULES:
        problems.extend(check(cfg))
    return problems


def validate(cfg: DictConfig) -> None:
    """Raise :class:`ConfigError` listing every problem, or return when the config is valid."""
    problems = collect_problems(cfg)
    if problems:
        raise ConfigError(problems)


@rule
def mandatory_values_are_set(cfg: DictConfig) -> Iterable[Problem]:
    """A value left at ``???`` would stop the trainer later; name it now."""
    yield from (
        Problem(
            key=key,
            message="is mandatory and has no value",
            fix=f"set it on the command line, e.g. {key}=...",
        )
        for key in _missing_keys(cfg, "")
    )


def _missing_keys(node: DictConfig, prefix: str) -> Iterable[str]:
    for key in node:
        path = f"{prefix}{key}"
        if OmegaConf.is_missing(node, key):
            yield path
        elif not OmegaConf.is_interpolation(node, key):
            child = node[key]
            if isinstance(child, DictConfig):
                yield from _missing_keys(child, path + ".")
