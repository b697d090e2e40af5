"""Lossless JSON: orjson on the fast path, the standard library where orjson would lose data.

orjson loads integers beyond 64 bits as floats (silently) and refuses to dump
them; the standard library keeps them exact. A cheap scan for long digit runs
picks the path, so ordinary documents never pay for the slow one. On that path a
number its float would change (0.30000000000000000001, or 1e-400 and 4e-324, past a
float's smallest normal, where a float holds fewer digits or none) is kept with its text,
and written back as that text.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

# 16+ digits may exceed 2**63 or lose float precision (a decimal point may sit among them:
# 12345678.123456789): let the exact parser decide. The scan maps every digit and point to
# "0" and looks for 16 of them in a row: both run in C, where a regex walk of a
# 1,000-message transcript cost 20 times orjson's parse of it. It also maps E to e, and
# every byte that may end a number (`,]}` and white space) to a comma, for the next scan.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789.E]} \t\n\r", b"0000000000e,,,,,,")
_LONG_NUMBER = b"0" * 16
# A number past a float's smallest normal (2.2e-308) holds fewer digits than its text, or
# none (1e-400 reads as 0.0): with at most 15 digits before it (more are a long number),
# its exponent is -294 or less. The scan looks for an exponent of three digits or more that
# ends a number: a UUID's `…1e-412…` is never one (a hyphen or a hex digit follows it).
_NEGATIVE_EXPONENT = re.compile(rb"e-000+(?:,|\Z)")
# Where it finds one, the text says whether it is that small: a digit before, -290 or less.
_TINY_EXPONENT = re.compile(rb"[0-9][eE]-0*(?:29[0-9]|[3-9][0-9]{2}|[1-9][0-9]{3,})(?![0-9])")
# Every stored document is scanned for a null: a compiled pattern scans a short text faster
# than `bytes.__contains__` does.
_NULL = re.compile(rb"null")


def _has_long_number(raw: bytes) -> bool:
    """Whether orjson could read a number in `raw` as another number: the exact parser
    reads it."""
    zeros = raw.translate(_DIGITS_AS_ZERO)
    # 16 digits and points in a row: a long number, unless most are points (the leader dots
    # of a table of contents, which need no exact parse).
    if _LONG_NUMBER in zeros and any(len(run) - run.count(b".") >= 16 for run in _RUN.findall(raw)):
        return True
    if b"e-000" not in zeros:  # in C, faster than the pattern's call on a short text
        return False
    return any(
        _TINY_EXPONENT.match(raw, found.start() - 1) for found in _NEGATIVE_EXPONENT.finditer(zeros)
    )


_RUN = re.compile(rb"[0-9.]{16,}")


class RawJSON:
    """JSON text already encoded (a stored message), embedded in a response without re-parsing."""

    __slots__ = ("text",)

    def __init__(self, text: str | bytes) -> None:
        self.text = text if isinstance(text, bytes) else text.encode()


class RawJSONArray:
    """A JSON array of encoded elements (a transcript): each embedded as is, never joined.

    orjson writes a thousand small fragments in half the time of their joined text.
    """

    __slots__ = ("texts",)

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts


class ExactFloat(float):
    """A number whose JSON text says more than its float does: it computes as the float,
    and is written back as the text."""

    __slots__ = ("text",)
    text: bytes


def exact_float(text: str) -> float:
    """The number JSON writes as `text`: a float, or an ExactFloat when the float would
    write it otherwise (0.30000000000000000001; 1e-400, which is 0.0; 4e-324, which is
    5e-324). An infinity stays one (for `check_finite` to refuse)."""
    value = float(text)
    if value != value or value in (_INFINITY, -_INFINITY):
        return value
    shortest = repr(value)
    if shortest == text or _same_number(shortest, text):  # 2.50, 1e5, 0e9: the same number
        return value
    exact = ExactFloat(value)
    exact.text = text.encode("ascii")
    return exact


def _same_number(shortest: str, text: str) -> bool:
    try:
        return Decimal(shortest) == Decimal(text)
    except InvalidOperation:
        # An exponent past Decimal's (more than 18 digits): the float is a zero (an
        # infinity is returned before), which the text is only when its digits are zeros.
        return _ZERO.fullmatch(text) is not None


_INFINITY = float("inf")
_ZERO = re.compile(r"-?[0.]+(?:[eE].*)?")


class NumberOutOfRange(ValueError):
    """A JSON number the codec does not hold: an integer with more digits than Python
    reads (a guard against quadratic conversion), or one past a float's range (1e400).
    The message says which, and the limit, for the client to read."""


# The most digits of an integer the codec reads: Python's own default guard against int()'s
# quadratic conversion, kept whatever PYTHONINTMAXSTRDIGITS says (0 turns Python's guard
# off); a lower setting of Python's is kept too.
MAX_INT_DIGITS = 4300


def _int_digits() -> int:
    python = sys.get_int_max_str_digits()
    return min(MAX_INT_DIGITS, python) if python else MAX_INT_DIGITS


def integer_too_long() -> NumberOutOfRange:
    return NumberOutOfRange(f"JSON integers may have at most {_int_digits()} digits")


def out_of_range() -> NumberOutOfRange:
    return NumberOutOfRange(
        f"JSON numbers must be finite: at most {sys.float_info.max!r} in magnitude"
    )


def exact_int(text: str) -> int:
    """The integer JSON writes as `text` (a GraphQL literal's), or NumberOutOfRange."""
    if len(text) - text.startswith("-") > MAX_INT_DIGITS:
        raise integer_too_long()
    try:
        return int(text)
    except ValueError:
        raise integer_too_long() from None


# Digits of long integers (past LONG_INT_DIGITS) one document may hold in all: each costs a
# conversion that grows with the square of its length, on the event loop. A body of 7,800
# integers of 4,300 digits held the server three seconds; these are some 230 of them.
LONG_INT_DIGITS = 64
MAX_LONG_INT_DIGITS = 1_000_000


def _counted_ints() -> Callable[[str], int]:
    """exact_int, refusing the document once its long integers hold too many digits."""
    left = MAX_LONG_INT_DIGITS

    def parse(text: str) -> int:
        nonlocal left
        digits = len(text) - text.startswith("-")
        if digits > LONG_INT_DIGITS:
            left -= digits
            if left < 0:
                raise NumberOutOfRange(
                    f"a JSON document may hold at most {MAX_LONG_INT_DIGITS:,} digits in "
                    f"integers of more than {LONG_INT_DIGITS} digits"
                )
        return exact_int(text)

    return parse


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(data: str | bytes) -> Any:
    """The JSON value of `data`, exact. ValueError if it is no JSON, NumberOutOfRange (a
    ValueError) for a number the codec does not hold."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if not _has_long_number(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if _ORJSON_INFINITY in str(exc):
                raise out_of_range() from None
            raise
    try:
        # Decoded strictly: json.loads would let the bytes of a surrogate (ED A0 80) through,
        # which orjson refuses as the invalid UTF-8 they are.
        value = json.loads(
            raw.decode("utf-8"),
            parse_constant=_reject_constant,
            parse_float=exact_float,
            parse_int=_counted_ints(),
        )
        # orjson refuses a lone surrogate (`"\ud800"`), which no UTF-8 text holds: so does
        # the exact path, looking at the texts only when one escapes a surrogate at all.
        _check(value, texts=_SURROGATE_ESCAPE.search(raw) is not None)
    except RecursionError:
        # orjson refuses nesting past 1024 levels with a ValueError: so does the exact path.
        raise ValueError("JSON nested too deeply") from None
    return value


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# The words of orjson's refusal of 1e400.
_ORJSON_INFINITY = "number is infinity"


def check_finite(value: Any) -> None:
    """ValueError if a NaN or an infinity is anywhere in `value`: JSON has no such number."""
    _check(value, texts=False)


def _check(value: Any, *, texts: bool) -> None:
    """`check_finite`, and with `texts` a UnicodeEncodeError (a ValueError) for a lone
    surrogate in any string or key: one walk for both."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise out_of_range()
    if isinstance(value, str):
        if texts:
            value.encode("utf-8")
    elif isinstance(value, dict):
        for key, item in value.items():
            if texts:
                key.encode("utf-8")
            _check(item, texts=texts)
    elif isinstance(value, list | tuple):
        for item in value:
            _check(item, texts=texts)


def _fragment(obj: Any) -> Any:
    if isinstance(obj, ExactFloat):
        return orjson.Fragment(obj.text)
    if isinstance(obj, RawJSON):
        return orjson.Fragment(obj.text)
    if isinstance(obj, RawJSONArray):
        return list(map(orjson.Fragment, obj.texts))
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _stdlib_dumps(value: Any) -> str:
    """`value` written by the standard library (integers past 64 bits, nesting deeper than
    orjson writes), with what only orjson could write as text put back: each ExactFloat goes
    in as a placeholder string, which the text then loses for the number's own digits."""
    digits: dict[str, str] = {}
    nonce = secrets.token_hex(8)

    def plain(obj: Any) -> Any:
        # Loops, not comprehensions: one Python frame per level of nesting, so that this
        # walk goes as deep as the standard library's encoder (each frame counts).
        if isinstance(obj, ExactFloat):
            key = f"\x00{nonce}:{len(digits)}\x00"
            digits[json.dumps(key)] = obj.text.decode("ascii")
            return key
        if isinstance(obj, dict):
            mapped = {}
            for k, v in obj.items():
                mapped[k] = plain(v)
            return mapped
        if isinstance(obj, list | tuple):
            items = []
            for v in obj:
                items.append(plain(v))
            return items
        if isinstance(obj, RawJSON):
            return plain(loads(obj.text))
        if isinstance(obj, RawJSONArray):
            texts = []
            for text in obj.texts:
                texts.append(plain(loads(text)))
            return texts
        return obj

    text = json.dumps(plain(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for placeholder, number in digits.items():
        text = text.replace(placeholder, number)
    return text


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON. Raises ValueError for what JSON cannot hold (lone surrogates),
    except that orjson writes a NaN or an infinity as null: what a client sent goes through
    `dumps_document`, which refuses those too. A response may hold a stored document deeper
    than orjson writes (its own nesting on top of the document's): the stdlib writes it."""
    return _dumps(value, deep=True)


def _dumps(value: Any, *, deep: bool) -> bytes:
    try:
        return orjson.dumps(value, default=_fragment)
    except TypeError as exc:
        reason = str(exc)
        exact = "64-bit" in reason or "Integer" in reason
        if not exact and not (deep and "Recursion" in reason):
            raise ValueError("nested too deeply" if "Recursion" in reason else reason) from exc
    try:
        return _stdlib_dumps(value).encode("utf-8")
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except (UnicodeEncodeError, TypeError) as exc:
        raise ValueError(str(exc)) from exc


def dumps_document(value: Any) -> bytes:
    """A client's document (a message, a state, metadata) as `dumps` writes it, refusing NaN
    and infinities, which orjson would store as a different document (null). Only a
    document with a null in its text is walked: ordinary ones cost nothing more."""
    encoded = _dumps(value, deep=False)
    if _NULL.search(encoded) is not None:
        check_finite(value)
    return encoded
