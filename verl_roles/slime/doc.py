"""The tables of docs/slime.md, rendered from the one table (:mod:`verl_roles.slime.names`).

``scripts/generate_slime_doc.py`` writes them between the markers of the document; a test fails when the
document and the table differ, so the document never holds a hand-kept copy.
"""

from __future__ import annotations

import re
from pathlib import Path

from verl_roles.slime.coerce import type_name
from verl_roles.slime.names import SLIME_KEYS, UNMAPPED, SlimeKey, is_nullable, target_type

# Each generated region of the document: its marker name and how it is rendered.
BEGIN = "<!-- generated: {name} (scripts/generate_slime_doc.py; do not edit by hand) -->"
END = "<!-- end: {name} -->"


def _value(key: SlimeKey) -> str:
    text = type_name(target_type(key))
    return f"{text} or null" if is_nullable(key) else text


def names_table() -> str:
    """Every slime name verl-roles reads and export-slime writes, and the keys it sets."""
    rows = [
        "| slime name | defined by | sets (inside the role's section) | value |",
        "| --- | --- | --- | --- |",
    ]
    for key in SLIME_KEYS:
        targets = " and ".join(f"`{target}`" for target in key.targets)
        rows.append(f"| `{key.name}` | {key.owner} | {targets} | {_value(key)} |")
    return "\n".join(rows)


def unmapped_table() -> str:
    """The slime/Megatron names a slime role file may hold that verl-roles refuses, and why."""
    rows = ["| slime name | what slime does with it | why verl-roles cannot map it | what to do instead |",
            "| --- | --- | --- | --- |"]
    rows += [f"| `{name}` | {why.slime} | {why.verl} | {why.fix[0].upper()}{why.fix[1:]}. |"
             for name, why in UNMAPPED.items()]
    return "\n".join(rows)


REGIONS = {"slime-names": names_table, "slime-unmapped": unmapped_table}


def render(document: str) -> str:
    """``document`` with every generated region replaced by its current rendering."""
    for name, table in REGIONS.items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), flags=re.DOTALL)
        if not pattern.search(document):
            raise ValueError(f"the document has no region {name!r} (a line {begin!r} ... {end!r})")
        text = f"{begin}\n{table()}\n{end}"
        document = pattern.sub(lambda _, text=text: text, document)
    return document


def rewrite(path: Path) -> bool:
    """Render the regions of the document at ``path`` in place; True when it changed."""
    old = path.read_text(encoding="utf-8")
    new = render(old)
    if new != old:
        path.write_text(new, encoding="utf-8")
    return new != old
