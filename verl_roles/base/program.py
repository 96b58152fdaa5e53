"""What a verl_roles program (``verl-roles``, ``python -m verl_roles.main``) sets up in its own process.

Python's cyclic garbage collector runs after every 700 new container objects by default. A composition
makes tens of thousands (every node of the config and its metadata, most of them alive as long as the
composition), so a run paid for dozens of passes that found little to free. Collected after every
100,000 new objects instead, ``python -m verl_roles.main model_engine=megatron`` took 0.33 instead of
0.36 CPU-seconds (three runs each), and a worker of the test suite spent about 3 instead of 8 seconds in
the collector. Only the programs' entry points call this; importing verl_roles (the Python API) leaves
the caller's settings as they are. (The main job also freezes what importing left behind:
:func:`verl_roles.commands.main.main`.)
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from verl_roles.base.errors import caused_by_interrupt, interrupted_at_start

# A program's entry point: its argument list (None: the process's) -> its exit code.
Entry = Callable[[list[str] | None], int]

# New objects between two passes of the youngest generation, then passes of each older one between two
# of the next.
COLLECTOR_THRESHOLDS = (100_000, 50, 100)


def tune_garbage_collection() -> None:
    """Collect garbage less often in this (short-lived) program process."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


def run_program(load: Callable[[], Entry], argv: list[str] | None) -> int:
    """Start a program: the collector tuned, its entry point loaded by ``load`` (what imports the heavy
    part), then run on ``argv``. Ctrl-C while Python loads it is one line and exit 130, not a traceback."""
    tune_garbage_collection()
    try:
        entry = load()
    except BaseException as error:
        if not caused_by_interrupt(error):
            raise
        return interrupted_at_start()
    return entry(argv)
