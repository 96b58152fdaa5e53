"""The verl_roles config tree, shipped as package data (source: the top-level conf/)."""
