"""Command-line flags: how a command declares the options it takes, and how typed arguments split into
flags (with their values) and everything else.

The table of Hydra's own flags mirrors Hydra's argument parser (``tests/test_cmdline.py`` pins it);
:mod:`verl_roles.inputs.cmdline` builds the one command-line model on it, and
:mod:`verl_roles.shell.command` derives each command's usage and completion from its specs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from verl_roles.base.layout import PRIMARY_CONFIG
from verl_roles.compat import HYDRA_INFO_TOPICS

NO_VALUE, REQUIRED, OPTIONAL = "none", "required", "optional"


@dataclass(frozen=True)
class FlagSpec:
    """One option a command accepts: its spellings (long first), whether it takes a value, and the
    allowed values (an ``OPTIONAL`` value is taken only when it is one of them, else ``const``)."""

    names: tuple[str, ...]
    value: str = NO_VALUE
    choices: tuple[str, ...] = ()
    const: str | None = None
    # What the value is, for messages: "a config name", written `--config-name NAME`.
    value_name: str = "a value"
    metavar: str = "VALUE"
    # What the flag does, one line for a command's --help (verl_roles.shell.command writes it).
    help: str = field(default="", compare=False)
    # The flag may be given several times, each value counting (`show --keys A --keys B`).
    repeatable: bool = field(default=False, compare=False)

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def spelling(self) -> str:
        """How --help writes it: ``-o, --output FILE``, ``--info [VALUE]``, ``--strict``."""
        names = ", ".join(sorted(self.names, key=lambda name: name.startswith("--")))
        if self.value == REQUIRED:
            return f"{names} {self.metavar}"
        if self.value == OPTIONAL:
            return f"{names} [{self.metavar}]"
        return names


HELP = FlagSpec(("--help", "-h"), help="this help")
HYDRA_HELP = FlagSpec(("--hydra-help",))
VERSION = FlagSpec(("--version",))
CFG = FlagSpec(("--cfg", "-c"), REQUIRED, ("job", "hydra", "all"))
RESOLVE = FlagSpec(("--resolve",))
PACKAGE = FlagSpec(("--package", "-p"), REQUIRED)
RUN = FlagSpec(("--run", "-r"))
MULTIRUN = FlagSpec(("--multirun", "-m"), help="a sweep (Hydra's multirun)")
SHELL_COMPLETION = FlagSpec(("--shell-completion", "-sc"))
CONFIG_PATH = FlagSpec(("--config-path", "-cp"), REQUIRED, value_name="a directory", metavar="DIR")
CONFIG_NAME = FlagSpec(
    ("--config-name", "-cn"), REQUIRED, value_name="a config name", metavar="NAME",
    help=f"the primary config ({PRIMARY_CONFIG} by default; your own from --config-dir)",
)
CONFIG_DIR = FlagSpec(
    ("--config-dir", "-cd"), REQUIRED, value_name="a directory", metavar="DIR",
    help="a folder of your own config files, searched next to verl_roles' conf/",
)
EXPERIMENTAL_RERUN = FlagSpec(("--experimental-rerun",), REQUIRED)
INFO = FlagSpec(("--info", "-i"), OPTIONAL, HYDRA_INFO_TOPICS, "all")

# Every flag of a Hydra app's command line (hydra/_internal/utils.py: get_args_parser).
HYDRA_FLAGS: tuple[FlagSpec, ...] = (
    HELP, HYDRA_HELP, VERSION, CFG, RESOLVE, PACKAGE, RUN, MULTIRUN, SHELL_COMPLETION,
    CONFIG_PATH, CONFIG_NAME, CONFIG_DIR, EXPERIMENTAL_RERUN, INFO,
)

# The flags that choose the config (every command that composes accepts them).
CONFIG_FLAGS: tuple[FlagSpec, ...] = (CONFIG_NAME, CONFIG_DIR)


@dataclass(frozen=True)
class Flag:
    """A flag as typed (one or two tokens) and its value; ``spec`` is None for an option no spec
    names (the command decides whether that is an error)."""

    spec: FlagSpec | None
    tokens: tuple[str, ...]
    value: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name if self.spec is not None else self.tokens[0].partition("=")[0]

    @property
    def typed_name(self) -> str:
        """The spelling the user typed (``-cn`` or ``--config-name``)."""
        return self.tokens[0].partition("=")[0]

    @property
    def missing_value(self) -> bool:
        return self.spec is not None and self.spec.value == REQUIRED and self.value is None


def _match_flag(name: str, specs: Sequence[FlagSpec]) -> FlagSpec | None:
    """The spec spelled ``name``, or the one long option it is an unambiguous prefix of (as argparse)."""
    for spec in specs:
        if name in spec.names:
            return spec
    if name.startswith("--") and len(name) > 2:
        matches = [s for s in specs if any(n.startswith(name) for n in s.names if n.startswith("--"))]
        if len(matches) == 1:
            return matches[0]
    return None


def split_arguments(args: Sequence[str], specs: Sequence[FlagSpec]) -> list[Flag | str]:
    """Flags (with their values) and the other arguments, in the order typed.

    A flag's value is never an argument: ``-p actor_rollout_ref.model.lora_rank`` is one flag. After
    ``--`` every token is an argument.
    """
    items: list[Flag | str] = []
    index, count = 0, len(args)
    while index < count:
        token = args[index]
        index += 1
        if token == "--":
            items.extend(args[index:])
            break
        if not token.startswith("-") or token == "-":
            items.append(token)
            continue
        name, eq, inline = token.partition("=")
        spec = _match_flag(name, specs)
        if spec is None:
            items.append(Flag(None, (token,), inline if eq else None))
        elif eq:
            items.append(Flag(spec, (token,), inline))
        elif spec.value == REQUIRED:
            following = args[index] if index < count else None
            if following is None or _match_flag(following.partition("=")[0], specs) is not None:
                items.append(Flag(spec, (token,), None))
            else:
                items.append(Flag(spec, (token, following), following))
                index += 1
        elif spec.value == OPTIONAL and index < count and args[index] in spec.choices:
            items.append(Flag(spec, (token, args[index]), args[index]))
            index += 1
        else:
            items.append(Flag(spec, (token,), spec.const))
    return items
