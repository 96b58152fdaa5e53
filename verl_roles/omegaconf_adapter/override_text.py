"""Hydra's override grammar, written back: a Python value as the text of an override value."""

from __future__ import annotations

import re

from verl_roles.compat.hydra import override_value_text


def element_text(value: object) -> str:
    """``value`` as Hydra writes it in an override (``true``, ``null``, ``[a,b]``, quoted strings as
    needed), so that the text parses back to the same value; ``repr`` for anything Hydra cannot write."""
    try:
        return override_value_text(value)
    except Exception:  # noqa: BLE001 - any value still gets shown
        return repr(value)


def quoted_string(text: str) -> str:
    """``text`` as a single-quoted string of Hydra's override grammar: it parses back to exactly ``text``,
    whatever it holds (``=``, ``,``, spaces, quotes, non-ASCII letters). In that grammar a backslash is
    itself except before a quote or at the end, where each one is doubled; a quote is escaped."""
    escaped = re.sub(r"(\\*)(?='|$)", lambda m: m.group(1) * 2, text)
    return "'" + escaped.replace("'", "\\'") + "'"
