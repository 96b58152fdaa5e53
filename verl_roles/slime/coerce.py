"""Converting a value read from a slime file to the type of the config key it sets.

A string is parsed, never judged by truthiness (slime itself converts only a string to an integer or a
float, so its quoted ``"false"`` stays a true value); what does not convert is a
:class:`CoercionError` whose message says what was expected.
"""

from __future__ import annotations

import math
from typing import Any

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class CoercionError(ValueError):
    """A value cannot be converted to the target type; the message says what was expected."""


def coerce(value: Any, kind: type, nullable: bool) -> Any:
    """Convert a value read from YAML to ``kind``; strings are parsed, never judged by truthiness."""
    if value is None or (
        nullable and isinstance(value, str) and value.strip().lower() in ("null", "none", "~")
    ):
        if nullable:
            return None
        raise CoercionError(f"expected {type_name(kind)}, not null")
    if kind is bool:
        return _to_bool(value)
    if kind is int:
        return _to_int(value)
    if kind is float:
        return _to_float(value)
    if kind is str:
        if isinstance(value, str):
            return value
        raise CoercionError("expected a string")
    if kind is list:
        return _to_str_list(value)
    raise AssertionError(f"no coercion for {kind}")


def type_name(kind: type) -> str:
    """How a value of ``kind`` is described to a user ("an integer")."""
    return {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list of names",
    }[kind]


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise CoercionError("expected true or false")


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise CoercionError("expected an integer, not a boolean")
    if isinstance(value, int):
        return value
    number = value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            try:
                number = float(value.strip())
            except ValueError:
                raise CoercionError("expected an integer") from None
    if isinstance(number, float) and math.isfinite(number) and number.is_integer():
        return int(number)
    raise CoercionError("expected an integer")


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise CoercionError("expected a number, not a boolean")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise CoercionError("expected a number such as 1e-5")


def _to_str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part for part in value.replace(",", " ").split() if part]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise CoercionError("expected a list of names, e.g. [core_attn, mlp]")
