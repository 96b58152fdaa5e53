"""``python -m verl_roles.main [hydra overrides]``: the main job (:mod:`verl_roles.commands.main`).

This module stays light: the main job is loaded inside :func:`main`, so Ctrl-C while it loads is one
line and exit 130, not a traceback."""

import sys

from verl_roles.errors import caused_by_interrupt, interrupted_at_start
from verl_roles.program import tune_garbage_collection


def main(argv: list[str] | None = None) -> int:
    tune_garbage_collection()
    try:
        from verl_roles.commands.main import main as run_main_job
    except BaseException as error:
        if not caused_by_interrupt(error):
            raise
        return interrupted_at_start()
    return run_main_job(argv)


if __name__ == "__main__":
    sys.exit(main())
