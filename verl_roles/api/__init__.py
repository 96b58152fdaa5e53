"""The one way above composition reaches it: composing a checked config (``composition``; its
``compose`` is :func:`verl_roles.compose`), planning a run before anything exists (``planning``) and a
sweep's jobs (``sweep_planning``)."""
