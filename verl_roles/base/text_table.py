"""Aligned plain-text tables, as the commands print them (one header line, then one line per row)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

GAP = "  "
# The narrowest a column is wrapped to when a table must fit a width.
MIN_COLUMN = 12


def render_rows(header: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None) -> str:
    """Columns padded to their widest cell, two spaces apart; no trailing spaces. With ``width``, the
    widest columns but the first are narrowed until the table fits, their cells wrapped onto more lines."""
    lines = [list(header), *(list(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    if width is not None:
        widths = _fitted(widths, width)
    out = []
    for line in lines:
        wrapped = [textwrap.wrap(text, w, break_long_words=True, break_on_hyphens=False) or [""]
                   if len(text) > w else [text] for text, w in zip(line, widths, strict=True)]
        for n in range(max(len(cell) for cell in wrapped)):
            parts = [cell[n] if n < len(cell) else "" for cell in wrapped]
            out.append(GAP.join(text.ljust(w) for text, w in zip(parts, widths, strict=True)).rstrip())
    return "\n".join(out)


def _fitted(widths: list[int], width: int) -> list[int]:
    widths = list(widths)
    while sum(widths) + len(GAP) * (len(widths) - 1) > width:
        widest = max(range(1, len(widths)), key=lambda i: widths[i], default=None)
        if widest is None or widths[widest] <= MIN_COLUMN:
            break
        widths[widest] -= 1
    return widths
