"""Facts about verl, per release, frozen from its code by scripts: our own types of its keys
(``own_types``), the sections verl passes on to another library (``passed_on``), when verl does not read a
value (``inert_table``), where our defaults differ from stock verl and why (``verl_differences``), the
generated data of each supported release (``verl_releases/``), and verl's own pre-Ray checks
(``verl_prelaunch``, which runs in verl's Python and imports nothing of verl_roles)."""
