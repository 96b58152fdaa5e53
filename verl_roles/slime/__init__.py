"""slime's per-role Megatron YAML (``--megatron-config-path``), one module per job, imports pointing one
way (each imports only those listed before it):

- :mod:`.names`: the one table of slime/Megatron argparse names and the verl_roles keys they set, and
  the file-format constants;
- :mod:`.coerce`: converting a value read from a file to the type of the key it sets;
- :mod:`.checkpoint`: slime's ``load`` (a checkpoint root, an iteration folder) as the folder verl loads;
- :mod:`.schedule`: slime's schedule lengths, in optimizer steps, as verl's, in trainer steps, and back;
- :mod:`.read`: reading and checking a file into per-role values (the roles step applies them);
- :mod:`.export`: the per-role differences of a composed config, written under slime's names
  (``verl-roles export-slime``);
- :mod:`.doc`: the tables of docs/slime.md, rendered from :mod:`.names`.
"""
