"""What a user hands us, read: the command-line model built on Hydra's override parser (``cmdline``), the
flags of every command (``flags``), the config tree and search path (``config_tree``), which paths a run
may read and write (``containment``), the sweep grid (``sweep_grid``) and dotted key paths (``paths``)."""
