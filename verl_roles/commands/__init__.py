"""The entry points: the main job (``main``) and each command of ``verl-roles``, one module named after
the command (``check_sweep`` is ``verl-roles check-sweep``), each declaring its ``COMMAND``."""
