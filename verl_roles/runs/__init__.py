"""How a run reaches the disk: the files a run writes (``run_files``), what jobs of a sweep may not share
(``sweep_isolation``), and the one write protocol (``write_protocol/``: claimed folders, atomic files,
recovery after a killed run)."""
