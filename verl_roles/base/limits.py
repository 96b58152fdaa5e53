"""Limits on the files a user hands us (option files under ``--config-dir``, slime files), and the
one way they are read.

A config file is a few kilobytes (the largest file of ``conf/`` is about 11 KB); a file over
:data:`MAX_CONFIG_FILE_BYTES` is refused before it is read, so a huge or endless file (a 50 MB
scalar, ``/dev/zero``, a FIFO) costs nothing. docs/validation.md ("Limits") says the same.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from verl_roles.base.errors import ConfigError, Problem

# The largest option or slime file read, in bytes (256 KiB: twenty times the largest file of conf/).
MAX_CONFIG_FILE_BYTES = 256 * 1024

# How deep a YAML file may nest its mappings and lists (conf/ nests at most 8 levels).
MAX_NESTING = 100

# How many values (keys, items, scalars) a YAML file may expand to once its aliases (`*name`) are
# followed: a few kilobytes of aliases can otherwise stand for billions of values.
MAX_VALUES = 200_000

# How many jobs a sweep may have. Every job is planned and checked before any starts (a composition
# each, a fraction of a second), and each is a whole PPO training: a bigger grid is a typo (a range
# step of 1e-9), which would keep the planning busy for hours.
MAX_SWEEP_JOBS = 1000


def read_config_file(path: str | os.PathLike[str], key: str) -> str:
    """The UTF-8 text of a user's config file, or a :class:`ConfigError` under ``key`` (how the user
    named the file) saying why it cannot be read: missing, not a regular file, too big, unreadable,
    not UTF-8."""
    file = Path(path).expanduser()
    try:
        info = file.stat()
    except FileNotFoundError:
        raise _refused(key, f"file not found (looked for {file.resolve()})",
                       "pass the path of an existing YAML file") from None
    except OSError as error:
        raise _refused(key, f"cannot read the file: {error.strerror or error}",
                       "check the path and its permissions") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise _refused(key, f"is {kind}, not a YAML file", "pass the path of a YAML file")
    if info.st_size > MAX_CONFIG_FILE_BYTES:
        raise _refused(key, f"is {info.st_size} bytes, more than the {MAX_CONFIG_FILE_BYTES} bytes a config "
                       "file may have", "keep only the settings in the file (a config file is a few KB)")
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_CONFIG_FILE_BYTES + 1)
    except OSError as error:
        raise _refused(key, f"cannot read the file: {error.strerror or error}",
                       "check the path and its permissions") from None
    if len(data) > MAX_CONFIG_FILE_BYTES:
        raise _refused(key, f"is more than the {MAX_CONFIG_FILE_BYTES} bytes a config file may have",
                       "keep only the settings in the file (a config file is a few KB)")
    try:
        # A byte-order mark (editors on Windows write one) is not part of the text.
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise _refused(
            key, f"is not UTF-8 text (byte {data[error.start]:#04x} on line {line})",
            f"save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`), or fix line {line}",
        ) from None


def too_many_values(data: object, key: str) -> ConfigError | None:
    """The error for YAML data that expands to more than :data:`MAX_VALUES` values, else None.

    Counts each container once per place it appears (what a copy of the data would hold), with the
    size of a shared container computed once, so an alias bomb is measured without expanding it.
    """
    sizes: dict[int, int] = {}

    def size(node: object) -> int:
        if not isinstance(node, dict | list):
            return 1
        known = sizes.get(id(node))
        if known is None:
            children = node.values() if isinstance(node, dict) else node
            known = sizes[id(node)] = 1 + sum(size(child) for child in children)
        return known

    total = size(data)
    if total <= MAX_VALUES:
        return None
    return _refused(key, f"expands to {total} values once its aliases (`*name`) are followed, more than "
                    f"the {MAX_VALUES} a config file may have", "write the values out instead of aliasing "
                    "aliases (a config file holds a few hundred values)")


def nesting_depth(data: object) -> int:
    """How deep mappings and lists nest in ``data`` (a scalar is 0), each shared container measured once."""
    depths: dict[int, int] = {}

    def depth(node: object, level: int) -> int:
        if not isinstance(node, dict | list) or level > MAX_NESTING:
            return 0
        known = depths.get(id(node))
        if known is None:
            children = node.values() if isinstance(node, dict) else node
            known = depths[id(node)] = 1 + max((depth(child, level + 1) for child in children), default=0)
        return known

    return depth(data, 0)


def override_nesting_depth(text: str) -> int:
    """How deep an override nests the config it sets: the sections of its key (``a.b.c`` is 3) and the
    brackets of its value. A composition holds the key's sections and the value's levels one inside the
    other, so both count (a 400-section key made the written config too deep for the YAML writer)."""
    key, eq, value = text.partition("=")
    sections = key.lstrip("+~").partition("@")[0].count(".") + 1
    return sections + text_nesting_depth(value) if eq else sections


def text_nesting_depth(text: str) -> int:
    """How deep ``[`` / ``{`` brackets nest in an override's text, outside quotes."""
    deepest = level = 0
    quote = ""
    escaped = False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "[{":
            level += 1
            deepest = max(deepest, level)
        elif char in "]}":
            level = max(level - 1, 0)
    return deepest


def too_deep(key: str) -> ConfigError:
    """The error for a YAML file nested deeper than Python can read (a parser recursion)."""
    return _refused(key, "nests its mappings or lists too deeply to be read",
                    f"a config file nests a few levels; keep it under {MAX_NESTING}")


def _refused(key: str, message: str, fix: str) -> ConfigError:
    return ConfigError([Problem(key=key, message=message, fix=fix)])
