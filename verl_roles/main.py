"""``python -m verl_roles.main [hydra overrides]``: the main job (:mod:`verl_roles.commands.main`).

This module stays light: the main job is loaded inside :func:`main`, so Ctrl-C while it loads is one
line and exit 130, not a traceback."""

import sys

from verl_roles.base.program import Entry, run_program


def _load() -> Entry:
    from verl_roles.commands.main import main as run_main_job

    return run_main_job


def main(argv: list[str] | None = None) -> int:
    return run_program(_load, argv)


if __name__ == "__main__":
    sys.exit(main())
