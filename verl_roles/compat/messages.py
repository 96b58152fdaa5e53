"""The library error texts verl_roles reads: one pattern per message of Hydra or OmegaConf that carries
what we need only in its text.

Wherever Hydra and OmegaConf give an exception class or attribute (``full_key``, ``missing_cfg_file``,
``options``, a chained cause) the wording path (:mod:`verl_roles.messages.wording`,
:mod:`verl_roles.messages.library_messages`) uses it; a pattern here is for the rest. Each names the exception
that carries the text and the test that fails when a release rewords it; the texts are the same on
Hydra 1.3/1.4 and OmegaConf 2.3/2.4 (both stacks run the suite).
"""

from __future__ import annotations

import re

from verl_roles.compat import Borrowed

_BAD = "tests/test_bad_inputs.py"
_ERRORS = "tests/test_errors.py"

# --- Hydra --------------------------------------------------------------------------------------------

# A sweep (`a=1,2`) in a run without -m: the override is only in the text (ConfigCompositionException).
SWEEP_IN_A_RUN = re.compile(r"Sweep parameters '([^']+)' requires --multirun")
# The same for a sweep Hydra's argument parser meets first.
AMBIGUOUS_VALUE = re.compile(r"Ambiguous value for argument '([^']+)'")
# `++group=option` (ConfigCompositionException, the override only in the text).
FORCED_GROUP = re.compile(r"force-add of config groups is not supported: '([^']+)'")
# A group chosen twice in a defaults list, or `+group=x` for a group that has an option.
GROUP_TWICE = re.compile(
    r"Multiple values for ([^ .]+(?:/[^ .]+)*)\. To override a value use 'override ([^']+)'")
# A sweep over a Hydra setting in a multirun.
HYDRA_SWEEP = re.compile(r"Sweeping over Hydra's configuration is not supported : '([^']+)'")
# hydra.searchpath set in a file that is not the primary config.
SEARCHPATH_OUTSIDE = re.compile(
    r"In '([^']+)': Overriding hydra\.searchpath is only supported from the primary")
# `~group` when no file chose an option of it.
NOTHING_TO_REMOVE = re.compile(r"Could not delete '([^']+)'\. No match in the defaults list")
# A file that sets a section to a value or a value to a section (Hydra wraps OmegaConf's ConfigTypeError).
MERGE_SHAPES = re.compile(
    r"In '([^']+)': ConfigTypeError raised while composing config:?\s*(.*?)(?: full_key:|$)")
# `+key=...` on an existing key (bare ConfigCompositionException).
ALREADY_THERE = re.compile(r"Could not append to config\. An item is already at '([^']+)'")
# `~key` on a missing key (bare ConfigCompositionException).
NOTHING_TO_DELETE = re.compile(r"Could not delete from config\. '([^']+)' does not exist")
# MissingConfigException names the missing entry (missing_cfg_file); the file whose defaults list names it
# only in the text.
DEFAULTS_OF = re.compile(r"In '([^']+)': Could not load '")
# A group choice Hydra's defaults list cannot place (`actor=megatron`).
GROUP_NOT_PLACED = re.compile(r"Could not override '([^']+)'\. Did you mean to override")
# Hydra's `${hydra:...}` resolver outside a running job (a plain ValueError).
HYDRA_RESOLVER = re.compile(r"HydraConfig was not set")

# --- OmegaConf ----------------------------------------------------------------------------------------

# InterpolationKeyError: the key referred to is only in the text (full_key is the key holding it).
INTERPOLATION_KEY = re.compile(r"Interpolation key '([^']+)' not found")
# UnsupportedInterpolationType: the resolver's name is only in the text.
RESOLVER = re.compile(r"Unsupported interpolation type (\S+)")
# Three plain InterpolationResolutionErrors only the text tells apart.
RECURSIVE = re.compile(r"Recursive interpolation detected")
ENV_UNSET = re.compile(r"Environment variable '([^']+)' not found")
RESOLVER_GRAMMAR = re.compile(
    r"GrammarParseError raised while resolving interpolation: (.*?)(?: full_key:|$)")

# What OmegaConf appends to a message after its text: the key, the reference type, the object type.
_KEY_SUFFIX = " full_key:"


def without_key_suffix(text: str) -> str:
    """An OmegaConf message without the ``full_key: ... object_type=...`` lines it appends."""
    return text.split(_KEY_SUFFIX)[0]


def own_text(error: BaseException) -> str:
    """An error's own message: OmegaConf's ``msg`` (without the lines it appends), else ``str(error)``."""
    return str(getattr(error, "msg", None) or error)


BORROWED: tuple[Borrowed, ...] = (
    Borrowed("TEXT", "Hydra: Sweep parameters '…' requires --multirun", "a sweep in a single run", _BAD),
    Borrowed("TEXT", "Hydra: Ambiguous value for argument '…'", "a sweep in a single run", _BAD),
    Borrowed("TEXT", "Hydra: force-add of config groups is not supported: '…'", "++group=option", _BAD),
    Borrowed("TEXT", "Hydra: Multiple values for G. To override a value use 'override …'",
             "a group chosen twice", _BAD),
    Borrowed("TEXT", "Hydra: Sweeping over Hydra's configuration is not supported : '…'",
             "a sweep over a Hydra setting", _BAD),
    Borrowed("TEXT", "Hydra: In '…': Overriding hydra.searchpath is only supported from the primary …",
             "hydra.searchpath outside the primary config", "tests/test_gate.py"),
    Borrowed("TEXT", "Hydra: Could not delete '…'. No match in the defaults list",
             "~group with nothing chosen", _BAD),
    Borrowed("TEXT", "Hydra: In '…': ConfigTypeError raised while composing config",
             "a section set to a value", _BAD),
    Borrowed("TEXT", "Hydra: Could not append to config. An item is already at '…'",
             "+key on an existing key", _BAD),
    Borrowed("TEXT", "Hydra: Could not delete from config. '…' does not exist",
             "~key on a missing key", _BAD),
    Borrowed("TEXT", "Hydra: In '…': Could not load '", "a defaults list naming a missing file", _ERRORS),
    Borrowed("TEXT", "Hydra: Could not override '…'. Did you mean to override",
             "a group choice Hydra cannot place", _BAD),
    Borrowed("TEXT", "Hydra: HydraConfig was not set", "${hydra:...} outside a job", _ERRORS),
    Borrowed("TEXT", "OmegaConf: Interpolation key '…' not found", "a reference to a missing key", _ERRORS),
    Borrowed("TEXT", "OmegaConf: Unsupported interpolation type X", "an unknown resolver", _ERRORS),
    Borrowed("TEXT", "OmegaConf: Recursive interpolation detected", "a reference loop", _ERRORS),
    Borrowed("TEXT", "OmegaConf: Environment variable '…' not found", "${oc.env:X} with X unset", _ERRORS),
    Borrowed("TEXT", "OmegaConf: GrammarParseError raised while resolving interpolation: …",
             "a resolver's argument that does not parse", _ERRORS),
    Borrowed("TEXT", "OmegaConf: the ' full_key:' lines appended to a message, and an error's .msg",
             "an error's own text", _ERRORS),
)
