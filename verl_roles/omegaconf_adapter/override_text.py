"""Hydra's override grammar, written back: a Python value as the text of an override value."""

from __future__ import annotations

from hydra.core.override_parser.types import Override


def element_text(value: object) -> str:
    """``value`` as Hydra writes it in an override (``true``, ``null``, ``[a,b]``, quoted strings as
    needed), so that the text parses back to the same value; ``repr`` for anything Hydra cannot write."""
    try:
        return Override._get_value_element_as_str(value)
    except Exception:  # noqa: BLE001 - any value still gets shown
        return repr(value)
