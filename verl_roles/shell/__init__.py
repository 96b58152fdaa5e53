"""How a command is declared and run: the declaration of a command, its flags and help (``command``),
the error boundary that turns a problem into one paragraph and an exit code (``reporting``), and the
table of ``verl-roles``' commands with its dispatch (``table``)."""
