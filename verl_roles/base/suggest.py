"""The one "did you mean": which of some names a user most likely meant by the one typed.

A name is near another when it is the same name but for case and ``-`` / ``_`` (``NNODES``, ``Nnodes`` and
``n-nodes`` for ``nnodes``; ``MEGATRON`` for ``megatron``), spelt alike once both are folded so
(difflib's ratio at least :data:`CUTOFF`), or abbreviates it (``lr`` for ``learning_rate``: the initials of
its words), or, when nothing is nearer, one extends the other by whole words (``--to-release`` for
``--to``). Every message that offers a guess (unknown
keys, options, commands, flags, roles, slime keys) asks here, so the guesses agree everywhere; a dotted
key of a config asks :func:`near_keys`. :func:`verl_roles.base.errors.did_you_mean` words the guesses.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

CUTOFF = 0.75
# For names a user picks from a short list (a group's options, the groups): a looser spelling still
# points at one of them.
LOOSE = 0.6
# How many keys ending like a typed path are offered (`verl-roles keys '*.PATH'` lists all of them).
MAX_KEYS = 3


def folded(name: str) -> str:
    """``name`` as it is compared: case and the spelling of a word break (``-`` or ``_``) do not count."""
    return name.casefold().replace("-", "_")


def abbreviates(one: str, other: str) -> bool:
    """``lr`` and ``learning_rate``: one name is the initials of the other's words."""

    def initials(name: str) -> str:
        return "".join(part[0] for part in name.split("_") if part)

    one, other = folded(one), folded(other)
    return "_" in one and initials(one) == other or "_" in other and initials(other) == one


def is_near(typed: str, candidate: str, cutoff: float = CUTOFF) -> bool:
    """Two names a user may confuse: the same but for case and ``-``/``_``, spelt alike, or one
    abbreviating the other."""
    typed_f, candidate_f = folded(typed), folded(candidate)
    return (typed_f == candidate_f or abbreviates(typed, candidate)
            or difflib.SequenceMatcher(None, typed_f, candidate_f).ratio() >= cutoff)


def extends(one: str, other: str) -> bool:
    """``--to-release`` and ``--to``: one name is the other with more words after it (folded)."""
    one, other = folded(one).strip("_"), folded(other).strip("_")
    return bool(one and other) and (one.startswith(other + "_") or other.startswith(one + "_"))


def near_names(typed: str, candidates: Iterable[str], n: int = 1, cutoff: float = CUTOFF) -> list[str]:
    """Up to ``n`` of ``candidates`` nearest ``typed`` (the same name but for case and ``-``/``_`` first,
    then abbreviations, then the closest spellings once folded, then a name it extends or that extends it
    by whole words), never ``typed`` itself."""
    pool = [c for c in dict.fromkeys(candidates) if c != typed]
    found = [c for c in pool if folded(c) == folded(typed)]
    found += [c for c in pool if abbreviates(typed, c) and c not in found]
    by_fold: dict[str, list[str]] = {}
    for candidate in pool:
        by_fold.setdefault(folded(candidate), []).append(candidate)
    for close in difflib.get_close_matches(folded(typed), list(by_fold), n=n, cutoff=cutoff):
        found += [c for c in by_fold[close] if c not in found]
    if not found:
        found = [c for c in pool if extends(typed, c)]
    return found[:n]


def near_keys(key: str, keys: Iterable[str], fits: Callable[[str], bool] = lambda _: True) -> list[str]:
    """The dotted keys of a config a user may have meant by ``key``, never ``key`` itself, each one
    ``fits`` accepts (e.g. of a type that takes the value typed).

    In order: a key of the same section whose name is near (spelt alike, or abbreviated:
    ``learning_rate`` and ``lr``); else keys whose path ends like the one typed (a path missing its first
    sections, ``rollout.n`` or ``optim.lr``: every role's key, up to :data:`MAX_KEYS`), or whose section
    path ends like the typed one and whose name is near (``optim.learning_rate`` -> each role's
    ``optim.lr``); else the nearest key anywhere whose name is near."""
    pool = [k for k in dict.fromkeys(keys) if k != key and fits(k)]
    parent, _, leaf = key.rpartition(".")
    siblings = [k for k in pool if k.rpartition(".")[0] == parent]
    by_leaf = near_names(leaf, [k.rpartition(".")[2] for k in siblings])
    if by_leaf:
        return [f"{parent}.{by_leaf[0]}" if parent else by_leaf[0]]
    if parent:
        exact = sorted(k for k in pool if k.endswith(f".{key}"))
        if exact:
            return exact[:MAX_KEYS]
        near = sorted(
            k for k in pool
            if k.rpartition(".")[0].endswith(f".{parent}") and is_near(leaf, k.rpartition(".")[2])
        )
        if near:
            return near[:MAX_KEYS]
    anywhere = [k for k in pool if is_near(leaf, k.rpartition(".")[2])]
    return near_names(key, anywhere, cutoff=LOOSE)
