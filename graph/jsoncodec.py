"""Lossless JSON: orjson on the fast path, the standard library where orjson would lose data.

orjson loads integers beyond 64 bits as floats (silently) and refuses to dump
them; the standard library keeps them exact. A cheap scan for long digit runs
picks the path, so ordinary documents never pay for the slow one.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# 16+ digits may exceed 2**63 or lose float precision: let the exact parser decide.
_LONG_NUMBER = re.compile(rb"\d{16,}")


class RawJSON:
    """JSON text already encoded (a stored message), embedded in a response without re-parsing."""

    __slots__ = ("text",)

    def __init__(self, text: str | bytes) -> None:
        self.text = text if isinstance(text, bytes) else text.encode()

    def value(self) -> Any:
        return loads(self.text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawJSON) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(data: str | bytes) -> Any:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if _LONG_NUMBER.search(raw) is None:
        return orjson.loads(raw)
    value = json.loads(raw, parse_constant=_reject_constant)
    _check_finite(value)
    return value


def _check_finite(value: Any) -> None:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ValueError("number out of range")
    if isinstance(value, dict):
        for item in value.values():
            _check_finite(item)
    elif isinstance(value, list):
        for item in value:
            _check_finite(item)


def _fragment(obj: Any) -> Any:
    if isinstance(obj, RawJSON):
        return orjson.Fragment(obj.text)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _plain(obj: Any) -> Any:
    if isinstance(obj, RawJSON):
        return json.loads(obj.text)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON. Raises ValueError for what JSON cannot hold (lone surrogates, NaN)."""
    try:
        return orjson.dumps(value, default=_fragment)
    except TypeError as exc:
        if "64-bit" not in str(exc) and "Integer" not in str(exc):
            raise ValueError(str(exc)) from exc
    try:
        text = json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_plain
        )
        return text.encode("utf-8")
    except (UnicodeEncodeError, TypeError) as exc:
        raise ValueError(str(exc)) from exc
