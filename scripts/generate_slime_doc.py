"""Write the generated tables of docs/slime.md from verl_roles' slime name table.

    python scripts/generate_slime_doc.py          # rewrite the tables in place
    python scripts/generate_slime_doc.py --check  # exit 1 when the document is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from verl_roles.slime import doc

DOCUMENT = Path(__file__).resolve().parent.parent / "docs" / "slime.md"


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = doc.render(DOCUMENT.read_text(encoding="utf-8")) != DOCUMENT.read_text(encoding="utf-8")
        if stale:
            print(f"{DOCUMENT} is stale: run python scripts/generate_slime_doc.py", file=sys.stderr)
        return 1 if stale else 0
    changed = doc.rewrite(DOCUMENT)
    print(f"{'wrote' if changed else 'unchanged'} {DOCUMENT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
