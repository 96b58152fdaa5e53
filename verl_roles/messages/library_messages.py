"""The Hydra and OmegaConf errors that carry no typed detail, worded as our problems (part of the one
wording path: :mod:`verl_roles.messages.wording` asks here when no typed shape of an error matched).

Hydra raises a bare ``ConfigCompositionException`` for a sweep in a single run, a forced or repeated
group choice and a search path set outside the primary config; OmegaConf raises errors whose outer
message can be empty (a file's key that is no text, a value of a type a config cannot hold: Hydra wraps
them with no text of its own) or names no key. Each is matched by its class where it has one and by its
text only where the library gives nothing else; whatever matches nothing still becomes a problem that
names a key (the innermost one the chain knows) and a fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from omegaconf.errors import ConfigTypeError, KeyValidationError, UnsupportedValueType

from verl_roles.base.errors import Problem, one_paragraph
from verl_roles.compat import messages as texts
from verl_roles.inputs.cmdline import CommandLine
from verl_roles.inputs.sweep_grid import hydra_setting_sweep

# Hydra's texts for what only a multirun runs (a sweep in a run without -m): the override is in them.
_SWEEP_IN_A_RUN = (texts.SWEEP_IN_A_RUN, texts.AMBIGUOUS_VALUE)


def sweep_in_a_run(text: str) -> Problem:
    """The one wording of a sweep typed for a single run (the main job, show, the API, any command). A
    sweep over a Hydra setting gets the wording it gets in a sweep: -m would not make it valid."""
    if text.lstrip("+~").startswith(("hydra.", "hydra/")):
        return hydra_setting_sweep(text)
    return Problem(
        key=f"`{text}`",
        message="sweeps over several values, but this is a single run (no -m)",
        fix=f"add -m to run one job per value (python -m verl_roles.main -m {text} ...; `verl-roles "
        f"check-sweep {text}` checks every point first), or give the key one value",
    )


def known_problem(error: BaseException, command: CommandLine) -> Problem | None:
    """Our problem for a Hydra or OmegaConf error known only by its text, else None."""
    text = one_paragraph(str(error))
    for shape in _SWEEP_IN_A_RUN:
        if match := shape.search(text):
            return sweep_in_a_run(match.group(1))
    for pattern, build in _SHAPES:
        if match := pattern.search(text):
            return build(match, command)
    return None


def _forced_group(match: re.Match[str], command: CommandLine) -> Problem:
    typed = match.group(1)
    group, _, option = typed.lstrip("+").partition("=")
    return Problem(key=group, message=f"is a config group; `{typed}` forces an option into it, which Hydra "
                   "does not do for groups", origin=command.origin_of(group),
                   fix=f"choose the option with `{group}={option}` (without `++`)")


def _group_twice(match: re.Match[str], command: CommandLine) -> Problem:
    group = match.group(1)
    override = command.override_for(group)
    if override is not None and override.text.startswith("+"):
        value = override.value_element_text()
        return Problem(key=group, message=f"already has an option, so `{override.text}` (which adds a group "
                       "choice) does not apply", origin=command.origin_of(group),
                       fix=f"drop the `+`: write `{group}={value}`")
    return Problem(key=group, message="is chosen twice in a defaults list",
                   fix=f"write `override {match.group(2)}` in the defaults list of your primary config, or "
                   f"choose it on the command line (`{group}=OPTION`)")


def _hydra_sweep(match: re.Match[str], command: CommandLine) -> Problem:
    return hydra_setting_sweep(match.group(1))


def _searchpath_outside(match: re.Match[str], command: CommandLine) -> Problem:
    return Problem(key=f"{match.group(1)}.yaml", message="sets hydra.searchpath, which Hydra reads only from "
                   "the primary config (--config-name) and the command line",
                   fix="move hydra.searchpath into your primary config, or pass the folder with --config-dir")


def _nothing_to_remove(match: re.Match[str], command: CommandLine) -> Problem:
    group = match.group(1)
    message = (f"`~{group}` removes an option of the group `{group}`, and no config file of this run chose "
               "one (the folders the engine and role options mount are never chosen)")
    return Problem(key=group, message=message,
                   origin=command.origin_of(group),
                   fix="drop the override; remove a single key with `~SECTION.KEY`, or choose an option of a "
                   "group such as role/critic")


def _merge_shapes(match: re.Match[str], command: CommandLine) -> Problem:
    return Problem(key=f"{match.group(1)}.yaml", message="sets a section of the config to a list or a single "
                   f"value, or a key holding a value to a section ({match.group(2).rstrip('.')})",
                   fix="set keys inside a section (`critic:` then `  optim:` then `    lr: 1.0e-05`), never "
                   "the section itself; `verl-roles keys SECTION` lists what a section holds")


_SHAPES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], CommandLine], Problem]], ...] = (
    (texts.FORCED_GROUP, _forced_group),
    (texts.GROUP_TWICE, _group_twice),
    (texts.HYDRA_SWEEP, _hydra_sweep),
    (texts.SEARCHPATH_OUTSIDE, _searchpath_outside),
    (texts.MERGE_SHAPES, _merge_shapes),
    (texts.NOTHING_TO_REMOVE, _nothing_to_remove),
)


def innermost_problem(chain: list[BaseException], command: CommandLine) -> Problem:
    """A problem for an error no shape matched: the innermost message of the chain that says something,
    at the innermost key any link names, with a fix for the kinds of value a config cannot hold."""
    key = next((str(k) for link in reversed(chain) if (k := getattr(link, "full_key", None))), "") or "config"
    said = [texts.without_key_suffix(one_paragraph(texts.own_text(link))) for link in chain]
    message = next((text for text in reversed(said) if text.strip(" .")), type(chain[-1]).__name__)
    if any(isinstance(link, UnsupportedValueType) for link in chain):
        fix = ("write a plain value: text, a number, true/false, null, a list or a mapping (a YAML tag such "
               "as !!set, !!binary or a date makes another type; an interpolation that makes a list or "
               "mapping cannot stand for a single value)")
    elif any(isinstance(link, KeyValidationError) for link in chain):
        fix = "write every key as a name (quote one that reads as null, a number or true/false)"
    elif any(isinstance(link, ConfigTypeError) for link in chain):
        fix = "set keys inside a section, never the section itself to a list or a value"
    elif key != "config":
        fix = f"check the value of {key} (`verl-roles explain {key}` names the file or override that set it)"
    else:
        fix = "check the override or config file the message names against `python -m verl_roles.main --help`"
    origin = command.origin_of(key) if key != "config" else ""
    return Problem(key=key, message=message, origin=origin, fix=fix)
