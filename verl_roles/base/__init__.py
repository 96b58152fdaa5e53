"""The words and tables everything uses: the error and problem types (``errors``), notices and warnings
(``notices``), the one layout table of engines, roles and sections (``layout``), the verl release seam
that everything reads (``releases``), file and value limits (``limits``), did-you-mean (``suggest``),
text tables, key documentation, how this copy was installed, and process set-up (``program``). Imports
nothing of verl_roles above it."""
