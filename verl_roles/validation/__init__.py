"""What a run may contain: the one gate on the composed config whatever channel brought a value (``gate``),
the typed schema (``schema``), the rules (``rules/``), the values verl would not read (``inert``) and the
placeholders only the user can fill (``placeholders``). Every check reports :class:`Problem` facts."""
