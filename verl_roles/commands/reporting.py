"""How every command reports a user mistake: one paragraph, exit code 2, no traceback.

``--debug`` (or ``VERL_ROLES_DEBUG=1`` / ``HYDRA_FULL_ERROR=1``) shows the traceback instead.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable

import yaml
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from verl_roles.errors import ConfigError, one_paragraph
from verl_roles.notices import ConfigWarning

EXIT_CONFIG_ERROR = 2
DEBUG_FLAG = "--debug"


def debug_requested(args: list[str]) -> bool:
    """True when the user asked to see tracebacks; removes ``--debug`` from ``args``."""
    asked = DEBUG_FLAG in args
    while DEBUG_FLAG in args:
        args.remove(DEBUG_FLAG)
    env = any(os.environ.get(name, "") not in ("", "0") for name in ("VERL_ROLES_DEBUG", "HYDRA_FULL_ERROR"))
    return asked or env


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    if issubclass(category, ConfigWarning):
        print(f"verl_roles warning: {message}", file=sys.stderr)
    else:
        print(warnings.formatwarning(message, category, filename, lineno, line), end="", file=sys.stderr)


def report(error: BaseException) -> str:
    """The text shown for ``error``: ours as written, a library's folded into one paragraph."""
    if isinstance(error, ConfigError):
        return error.render()
    return one_paragraph(str(error))


def run_reporting_errors(action: Callable[[], object], args: list[str]) -> int:
    """Run ``action``; turn a user mistake into a message on stderr and exit code 2."""
    debug = debug_requested(args)
    saved_env = os.environ.get("HYDRA_FULL_ERROR")
    # Let Hydra re-raise instead of printing its own report, so we word the error ourselves.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        # catch_warnings puts the caller's filters and showwarning back on the way out.
        with warnings.catch_warnings():
            warnings.simplefilter("default", ConfigWarning)
            warnings.showwarning = _show_warning
            action()
    except (ConfigError, HydraException, OmegaConfBaseException, yaml.YAMLError) as error:
        if debug:
            raise
        print(f"verl_roles error: {report(error)}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    finally:
        if saved_env is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = saved_env
    return 0
