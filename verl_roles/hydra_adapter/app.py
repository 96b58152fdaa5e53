"""The main job as a Hydra app: Hydra's own command line and run loop, with our config loader.

``@hydra.main`` reads ``sys.argv`` and builds Hydra's stock config loader. :func:`run_app` does what
the decorator does, on an argument list it is given: Hydra's argument parser, then Hydra's
``_run_hydra`` (``--cfg``, ``--info``, ``--help``, ``-m``, launchers and sweepers behave as in any
Hydra app), with our :class:`~verl_roles.hydra_adapter.loader.ConfigLoader` (caches and the gate on
every composition). Hydra builds its loader inside ``_run_hydra`` (``Hydra.create_main_hydra2``) with
no hook to choose it, so the class that function looks up is replaced for the duration of the call.
The launchers reuse that loader for every job of a sweep (and pickle it to their worker processes).

Given what the main job composed before Hydra started (a :class:`~verl_roles.hydra_adapter.serving.Served`
run), the loader serves it to every composition Hydra asks for. :func:`job_outcome` reads a finished
job's return value without Hydra's re-raise of a failure.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.utils import JobReturn
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from verl_roles.base.errors import ConfigError, Problem, one_paragraph
from verl_roles.base.layout import PRIMARY_CONFIG
from verl_roles.compat import hydra as hydra_compat
from verl_roles.hydra_adapter.compose import version_base_1_3
from verl_roles.hydra_adapter.loader import ConfigLoader
from verl_roles.hydra_adapter.serving import Served
from verl_roles.inputs.config_tree import CONF_DIR

TaskFunction = Callable[[DictConfig], object]


class _AppLoader(ConfigLoader):
    """The app's loader, built where Hydra builds its own (one per app run), serving what the run being
    started composed. A class (Hydra 1.4 reads the class it builds from as a class), at the module's top
    level (launchers pickle the loader to their workers)."""

    def __init__(self, config_search_path: ConfigSearchPath) -> None:
        super().__init__(config_search_path)
        served = _STARTING.served
        if served is not None:
            self.serve(served)


class _Starting(threading.local):
    """What the app run being started in this thread serves (None: Hydra composes)."""

    served: Served | None = None


_STARTING = _Starting()


@contextmanager
def _hydra_builds_loaders_serving(served: Served | None) -> Iterator[None]:
    _STARTING.served = served
    try:
        with hydra_compat.app_loader_class(_AppLoader):
            yield
    finally:
        _STARTING.served = None


_FULL_ERROR = "HYDRA_FULL_ERROR"


@contextmanager
def _hydra_raises() -> Iterator[None]:
    """Hydra's run loop re-raises an error instead of printing its own report, so the error boundary
    words it; only for the call: what the command starts afterwards (verl's trainer, under launch) gets
    the user's own ``HYDRA_FULL_ERROR``."""
    saved = os.environ.get(_FULL_ERROR)
    os.environ[_FULL_ERROR] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(_FULL_ERROR, None)
        else:
            os.environ[_FULL_ERROR] = saved


def run_app(task: TaskFunction, argv: Sequence[str], served: Served | None = None) -> None:
    """Run ``task`` as the Hydra app of our primary config on the arguments ``argv``.

    ``served``: what the main job composed for this run (None: Hydra composes, for its views such as
    ``--cfg``). Hydra's errors propagate (Hydra's own report is off for the call); a bad flag exits 2 with
    Hydra's usage, as in any Hydra app. ``--experimental-rerun`` (which unpickles a previous run's file)
    is the caller's to refuse.
    """
    parser = hydra_compat.args_parser()
    args = parser.parse_args(list(argv))
    if args.experimental_rerun is not None:
        raise ValueError("--experimental-rerun is not supported: it unpickles a file")
    try:
        with version_base_1_3(), _hydra_builds_loaders_serving(served), _hydra_raises():
            hydra_compat.run_hydra(
                args=args,
                args_parser=parser,
                task_function=task,
                config_path=str(CONF_DIR),
                config_name=PRIMARY_CONFIG,
            )
    except (ConfigError, HydraException, OmegaConfBaseException):
        raise
    except Exception as error:  # noqa: BLE001 - what Hydra or a plugin refused is the user's setting
        problem = refused_setting(error)
        if problem is None:
            raise
        raise ConfigError([problem]) from error


_OURS = str(Path(__file__).resolve().parent.parent)


def refused_setting(error: BaseException) -> Problem | None:
    """A problem for an exception Hydra, a plugin or a library they hand the user's settings to raised
    (an unknown logging level, ``n_jobs=0``, two flags that exclude each other), named by the settings
    that reach that code; None when the innermost frame is ours (a bug of verl_roles)."""
    raised_by = hydra_compat.component_that_raised(error, _OURS)
    if raised_by is None:
        return None
    settings, component = raised_by
    text = one_paragraph(str(error)) or type(error).__name__
    them = "it" if settings == "the command line" else "them"
    return Problem(
        key=settings,
        message=f"{component} refused {them}: {type(error).__name__}: {text}",
        fix="correct the setting it names (`python -m verl_roles.main --cfg hydra` shows Hydra's "
        "settings; `--hydra-help` the flags)",
    )


def job_outcome(job_return: JobReturn) -> object:
    """A finished job's return value (its exception when it raised), read without Hydra's re-raise."""
    return hydra_compat.job_outcome(job_return)
