"""The Hydra adapter, upper half: composition through Hydra's own loader, and the main job as a Hydra app.

It sits above the core (it calls the gate and the steps on what it composes) and below the API and the
commands, which reach it only through :mod:`verl_roles.api.composition`. What it borrows from Hydra's private
API (the loader, repositories and config sources it subclasses, the globals swapped for one call, what
``@hydra.main`` runs) comes from :mod:`verl_roles.compat.hydra`, which lists each entry with the public
behaviour it stands for and the test that guards it; nothing here names a private of Hydra or OmegaConf
(``tests/test_layers.py`` fails when something does).

- ``loader``: Hydra's loader with our caches, the gate and a served run; ``caches``: parsed files,
  defaults lists and compositions; ``sources``: config sources reading with the one YAML loader;
  ``plain_compose``: the task part of a defaults list merged as plain data; ``release_layer``: a verl
  release's layer over each shipped file; ``user_files``: a user's files that would do nothing;
  ``compose``: the entry points the API calls; ``app``: the main job as a Hydra app; ``serving``: what
  the main job composed, handed to Hydra.
"""
