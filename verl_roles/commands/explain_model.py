"""What ``verl-roles explain`` reports: a key's value and the steps behind it, and the layers of the
defaults list it reads them from (:mod:`verl_roles.commands.explain`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from omegaconf import DictConfig, ListConfig, OmegaConf

from verl_roles.base.errors import ConfigError
from verl_roles.omegaconf_adapter.yaml_dialect import dump_flow


class _Removed:
    """The value of a key a pipeline step removed."""

    def __repr__(self) -> str:
        return "(removed)"


REMOVED = _Removed()


@dataclass
class Step:
    """One place that set the key: where, how, and the raw (unresolved) value it wrote."""

    source: str
    raw: object


# How many levels of references are shown indented; deeper ones (a long chain of interpolations) keep
# the last indent and say their level, so the text grows with the chain, not with its square.
MAX_INDENTS = 8


@dataclass
class Explanation:
    """``value`` is what the main job would write for ``key`` (:data:`REMOVED` for a key a pipeline
    step removed); ``invalid`` is the error the main job would stop with, when the config is invalid
    (``value`` is then the value as far as the pipeline got)."""

    key: str
    value: object
    steps: list[Step]
    references: list[Explanation] = field(default_factory=list)
    invalid: ConfigError | None = None

    def render(self, indent: str = "") -> str:
        """The explanation and, indented under it, those of the keys it follows (walked with a stack of
        its own: a chain of thousands of references renders as a short one does)."""
        lines: list[str] = []
        # (an explanation, how deep it is, the line that leads to it)
        stack: list[tuple[Explanation, int, str | None]] = [(self, 0, None)]
        while stack:
            explanation, depth, lead = stack.pop()
            at = indent + "    " * min(depth, MAX_INDENTS)
            lines += [lead] if lead is not None else []
            lines.append(f"{at}{explanation.key} = {show_value(explanation.value)}")
            for number, step in enumerate(explanation.steps, 1):
                lines.append(f"{at}  {number}. {step.source}: {show_value(step.raw)}")
            level = f" (level {depth + 1})" if depth + 1 > MAX_INDENTS else ""
            stack.extend((reference, depth + 1, f"{at}  which follows ${{{reference.key}}}{level}:")
                         for reference in reversed(explanation.references))
        return "\n".join(lines)


def show_value(value: object) -> str:
    """A value as resolved.yaml spells it (the one spelling of every view); a marker as itself."""
    if isinstance(value, DictConfig | ListConfig):
        value = OmegaConf.to_container(value, resolve=False)
    return dump_flow(value)


@dataclass(frozen=True)
class Unresolvable:
    """The value of a key whose interpolation does not resolve: what resolution says instead."""

    reason: str

    def __str__(self) -> str:
        return f"<cannot resolve: {self.reason}>"


@dataclass(frozen=True)
class UserDir:
    """A user's ``--config-dir``: as typed (how its files are named) and as an absolute path."""

    typed: str
    path: str

    @classmethod
    def of(cls, typed: str, path: str) -> UserDir:
        return cls(typed=typed.rstrip("/") or "/", path=path)

    @property
    def url(self) -> str:
        return f"file://{self.path}"


@dataclass(frozen=True)
class Layer:
    """One file of the defaults list: its name (``role/critic/default.yaml``, a user's file prefixed
    with its ``--config-dir``), how it was mounted, and its content at its package."""

    file: str
    source: str
    cfg: DictConfig
    # Keys whose value here is the chosen verl release's, not conf/'s (its layer): key -> the note.
    notes: Mapping[str, str] = field(default_factory=dict)

    def source_of(self, key: str) -> str:
        note = self.notes.get(key)
        return f"{self.source}, {note}" if note else self.source
