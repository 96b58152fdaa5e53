"""``verl-roles``: the developer commands around the main job.

Each subcommand lives in its own module under :mod:`verl_roles.commands`, with a
``run(args: list[str]) -> int`` function; this file only dispatches, so ``verl-roles --help`` lists
what exists and imports nothing else.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module under verl_roles.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check-sweep": ("check_sweep", "compose and validate every point of a sweep before launching it"),
    "diff": ("diff", "the resolved keys that differ between two compositions: diff [A] -- [B]"),
    "migrate": ("migrate", "print the modern equivalent of a legacy command line"),
    "explain": ("explain", "a key's value and every file, role and override that set it"),
    "export-slime": ("export_slime", "a config's per-role differences as slime's per-role YAML"),
    "keys": ("keys", "list keys with their type, default and the comment above them in conf/: keys [GLOB]"),
    "roles": ("roles", "one table of the keys whose values differ between actor, ref, critic and rollout"),
    "show": ("show", "the config the main job runs with (its resolved.yaml), or one role or some keys of it"),
    "launch": ("launch", "write a run directory as the main job does, then train on it with verl"),
}

USAGE = "usage: verl-roles COMMAND [ARGS...]   (verl-roles COMMAND --help for a command's usage)"


def _help() -> str:
    width = max((len(name) for name in COMMANDS), default=0)
    lines = [USAGE, "", "commands:"]
    lines += [f"  {name.ljust(width)}  {summary}" for name, (_, summary) in sorted(COMMANDS.items())]
    lines += ["", "The main job itself is `python -m verl_roles.main [hydra overrides]`."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help", "help"):
        print(_help())
        return 0
    commands = ", ".join(sorted(COMMANDS))
    if not args:
        # Worded as commands.reporting words every user mistake (not imported: it loads Hydra).
        print(f"verl_roles error: no command given. Fix: write `verl-roles COMMAND`, one of {commands} "
              "(`verl-roles --help` says what each does).", file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        from difflib import get_close_matches

        close = get_close_matches(name, COMMANDS, n=1)
        hint = f" Did you mean `verl-roles {close[0]}`?" if close else ""
        print(f"verl_roles error: unknown command {name!r}.{hint} Commands: {commands}.", file=sys.stderr)
        return 2
    from verl_roles.installation import print_shadowing_notice

    print_shadowing_notice()
    module = importlib.import_module(f"verl_roles.commands.{COMMANDS[name][0]}")
    return int(module.run(rest))


if __name__ == "__main__":
    sys.exit(main())
