"""``verl-roles``: the developer commands around the main job (:mod:`verl_roles.shell.table` lists them
and dispatches; each is a module of :mod:`verl_roles.commands`).

This module stays light: the commands are loaded inside :func:`main`, so Ctrl-C while they load is one
line and exit 130, not a traceback."""

import sys

from verl_roles.base.program import Entry, run_program


def _load() -> Entry:
    from verl_roles.shell.table import dispatch

    return dispatch


def main(argv: list[str] | None = None) -> int:
    return run_program(_load, argv)


if __name__ == "__main__":
    sys.exit(main())
