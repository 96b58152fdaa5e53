"""The one "did you mean": which of some names a user most likely meant by the one typed.

A name is near another when it is spelt alike (difflib's ratio at least :data:`CUTOFF`) or abbreviates it
(``lr`` for ``learning_rate``: the initials of its words). Every message that offers a guess (unknown
keys, options, commands, roles, slime keys) asks here, so the guesses agree everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.75


def abbreviates(one: str, other: str) -> bool:
    """``lr`` and ``learning_rate``: one name is the initials of the other's words."""

    def initials(name: str) -> str:
        return "".join(part[0] for part in name.split("_") if part)

    return "_" in one and initials(one) == other or "_" in other and initials(other) == one


def is_near(typed: str, candidate: str, cutoff: float = CUTOFF) -> bool:
    """Two names a user may confuse: spelt alike, or one abbreviating the other."""
    return abbreviates(typed, candidate) or difflib.SequenceMatcher(None, typed, candidate).ratio() >= cutoff


def near_names(typed: str, candidates: Iterable[str], n: int = 1, cutoff: float = CUTOFF) -> list[str]:
    """Up to ``n`` of ``candidates`` nearest ``typed`` (abbreviations first, then the closest spellings),
    never ``typed`` itself."""
    pool = [c for c in dict.fromkeys(candidates) if c != typed]
    found = [c for c in pool if abbreviates(typed, c)]
    found += [c for c in difflib.get_close_matches(typed, pool, n=n, cutoff=cutoff) if c not in found]
    return found[:n]
