"""What each key is for: the comment written above it in the config files.

Every field in ``conf/`` has a comment block right above it (verl's style: a comment above each field,
a blank line between fields). :func:`file_comments` reads those blocks from a file's text with a line
scanner (no YAML parser keeps comments), keyed by the field's dotted path inside the file;
:func:`key_comments` mounts each file of a composition's defaults list at its package, so that every key
of the composed config gets the comment of the last file that documents it (a role option that sets a
key documents it better than the file it overrides).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# `key:` at some indentation, then a value, a comment or nothing (a section). Keys are plain words.
_FIELD = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_][\w.\-]*)\s*:(?:\s|$)")
_BLOCK_SCALAR = re.compile(r":\s*[|>][+-]?\d*\s*(#.*)?$")
_PACKAGE_HEADER = re.compile(r"^#\s*@package\b")


def _comment_text(line: str) -> str:
    return line.strip()[1:].strip()


def file_comments(text: str) -> dict[str, str]:
    """Dotted path inside the file -> the comment block directly above that field (lines joined).

    The ``defaults`` list and list items are skipped; a ``# @package`` header is not a comment of the
    field below it. A blank line ends a comment block, so a file's header comment, set off by a blank
    line, documents no field.
    """
    comments: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    block_indent: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if block_indent is not None:
            if stripped and indent <= block_indent:
                block_indent = None
            else:
                continue
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            if not _PACKAGE_HEADER.match(stripped):
                pending.append(_comment_text(stripped))
            continue
        match = _FIELD.match(line)
        if match is None or stripped.startswith("-"):
            pending = []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([*(key for _, key in stack), match["key"]])
        if pending and not path.startswith("defaults"):
            comments[path] = " ".join(part for part in pending if part)
        pending = []
        stack.append((indent, match["key"]))
        if _BLOCK_SCALAR.search(line):
            block_indent = indent
    return comments


@lru_cache(maxsize=256)
def _comments_of_file(path: str, mtime_ns: int, size: int) -> dict[str, str]:
    """:func:`file_comments` of one file, cached per process while the file is unchanged."""
    return file_comments(Path(path).read_text(encoding="utf-8"))


def comments_in(path: Path) -> dict[str, str]:
    info = path.stat()
    return _comments_of_file(str(path), info.st_mtime_ns, info.st_size)


@dataclass(frozen=True)
class MountedFile:
    """One file of a defaults list: where it is on disk and the package its keys are mounted at
    (``""`` for the top level)."""

    path: Path
    package: str


def key_comments(files: Iterable[MountedFile]) -> dict[str, str]:
    """Full key -> comment, over the files of a defaults list in merge order (the last file that
    documents a key wins)."""
    comments: dict[str, str] = {}
    for mounted in files:
        prefix = f"{mounted.package}." if mounted.package else ""
        for path, comment in comments_in(mounted.path).items():
            comments[prefix + path] = comment
    return comments
