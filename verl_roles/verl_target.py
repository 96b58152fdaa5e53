"""The verl release whose trainer config we write: one constant, read by the launch command, the
snapshot header, the acceptance suite and CI (pyproject's ``verl`` extra pins the same version)."""

from __future__ import annotations

VERL_TARGET_VERSION = "0.9.1"

# The optional extra that installs it: heavy (about 6.4 GB with torch, ray and vllm's dependencies),
# so composing and validating configs never needs it.
VERL_EXTRA = "verl"


def install_hint() -> str:
    """How to get the target verl into the current environment."""
    return (
        f'install it with `pip install "verl_roles[{VERL_EXTRA}]"` (verl=={VERL_TARGET_VERSION}; about 5 '
        "minutes and 6.4 GB; CPU-only is enough to check a config), or point `--verl-python` at the Python "
        "of an environment that has it"
    )
