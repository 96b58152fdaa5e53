"""``python -m verl_roles.main [hydra overrides]``: the main job (:mod:`verl_roles.commands.main`)."""

import sys

from verl_roles.commands.main import main

if __name__ == "__main__":
    sys.exit(main())
