"""The Hydra adapter, lower half: OmegaConf node internals, the one YAML dialect, Hydra's override text.

These helpers sit below the core (the steps, rules and tables read values through them) and import
nothing of verl_roles above the foundation tier. What they borrow from OmegaConf's private API (a node's
state, its YAML loader and dumper, the interpolation check, one key's resolution) comes from
:mod:`verl_roles.compat.omegaconf`, which lists each entry with the public behaviour it stands for and the
test that guards it; nothing here names a private of Hydra or OmegaConf (``tests/test_layers.py`` fails
when something does).

- ``nodes``: resolution in place, raw values, key paths, quick selection; ``build``: configs built node
  by node from plain data; ``plain_merge``: OmegaConf's merge of plain data; ``yaml_dialect``: the one
  YAML loader and dumper; ``override_text``: a value written back as override text.
"""
