"""The JSON codec stores what clients send exactly: integers of any size, any Unicode text,
any nesting; what JSON cannot hold is a ValueError, never a silently different document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph.domain import jsoncodec
from graph.domain.jsoncodec import RawJSON, RawJSONArray
from tests.unit.helpers import PROPERTY

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 10, max_value=2**70)
    | st.integers(max_value=-(2**63) + 10, min_value=-(2**70))
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types all the way down (True is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@PROPERTY
@given(documents)
def test_every_json_document_survives_a_round_trip(value: Any) -> None:
    encoded = jsoncodec.dumps(value)
    assert same(jsoncodec.loads(encoded), value)
    # Other clients read the stored text with ordinary JSON parsers.
    assert same(json.loads(encoded), value)
    # And what a client sends is stored exactly so.
    assert jsoncodec.dumps_document(value) == encoded


@PROPERTY
@given(documents)
def test_loads_reads_any_json_text_exactly(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert same(jsoncodec.loads(text), value)
    assert same(jsoncodec.loads(text.encode()), value)


@pytest.mark.parametrize(
    "number", [2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**40, -(10**100), 12345678901234567]
)
def test_big_integers_stay_exact_integers(number: int) -> None:
    document = {"n": number, "nested": [number, {"m": number}]}
    encoded = jsoncodec.dumps(document)
    assert str(number).encode() in encoded
    assert same(jsoncodec.loads(encoded), document)


def test_a_float_with_many_digits_keeps_its_value() -> None:
    assert jsoncodec.loads(jsoncodec.dumps(0.30000000000000004)) == 0.30000000000000004
    assert jsoncodec.loads("[1.0000000000000002]") == [1.0000000000000002]


def test_dumps_is_compact_utf8_in_the_order_given() -> None:
    assert jsoncodec.dumps({"z": 1, "a": [1, 2], "é": "ü 😀"}) == (
        '{"z":1,"a":[1,2],"é":"ü 😀"}'.encode()
    )


def test_unicode_escapes_read_as_their_characters() -> None:
    assert jsoncodec.loads('"\\u00e9\\ud83d\\ude00"') == "é😀"


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        [1, float("nan")],
        {"a": {"b": [float("inf")]}},
        ("tuple", float("-inf")),
        {"big": 2**64, "x": float("nan")},
    ],
    ids=["nan", "inf", "-inf", "nan in a list", "inf nested", "in a tuple", "beside a big int"],
)
def test_a_document_with_a_non_finite_number_is_refused(value: Any) -> None:
    # Regression: orjson writes NaN and infinities as null, so such a message (from a
    # GraphQL literal like `{score: 1e400}`) was stored as a different document.
    with pytest.raises(ValueError):
        jsoncodec.dumps_document(value)


@pytest.mark.parametrize("value", [None, [None, 1.5], {"a": None, "b": "null"}], ids=repr)
def test_a_document_with_nulls_and_finite_numbers_is_kept(value: Any) -> None:
    assert same(jsoncodec.loads(jsoncodec.dumps_document(value)), value)


def test_dumps_refuses_a_non_finite_number_beside_a_big_integer() -> None:
    with pytest.raises(ValueError):
        jsoncodec.dumps({"big": 2**64, "x": float("nan")})


@pytest.mark.parametrize(
    "text",
    ["NaN", "[Infinity]", '{"a": -Infinity}', "1e400", "[-1e400]", "[1e400, 12345678901234567890]"],
)
def test_loads_refuses_non_finite_numbers(text: str) -> None:
    with pytest.raises(ValueError):
        jsoncodec.loads(text)


@pytest.mark.parametrize(
    "value", ["\ud800", {"a": "x\udfff"}, {"\ud800": 1}, [2**64, "\ud800"]], ids=repr
)
def test_dumps_refuses_lone_surrogates(value: Any) -> None:
    with pytest.raises(ValueError):
        jsoncodec.dumps(value)


@pytest.mark.parametrize(
    "value",
    [object(), {1, 2}, b"bytes", {"a": object()}],
    ids=["an object", "a set", "bytes", "an object in a dict"],
)
def test_dumps_refuses_what_is_no_json_as_value_error(value: Any) -> None:
    with pytest.raises(ValueError):
        jsoncodec.dumps(value)


@pytest.mark.parametrize(
    "text", ["", "{", "[1,]", "{'a': 1}", '"\\ud800"', b"\xff", "[1] [2]", "\ud800"], ids=repr
)
def test_loads_refuses_what_is_no_json(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        jsoncodec.loads(text)


@pytest.mark.parametrize("tail", ["", "12345678901234567890"], ids=["fast path", "exact path"])
def test_loads_refuses_absurd_nesting_on_either_path(tail: str) -> None:
    depth = 100_000
    with pytest.raises(ValueError):
        jsoncodec.loads("[" * depth + tail + "]" * depth)


def test_loads_reads_nesting_a_client_could_mean() -> None:
    depth = 200
    for tail in ("1", "12345678901234567890"):
        value: Any = jsoncodec.loads("[" * depth + tail + "]" * depth)
        for _ in range(depth):
            (value,) = value
        assert value == int(tail)


def test_raw_json_is_embedded_verbatim() -> None:
    raw = RawJSON('{"role": "user",  "content": "hi"}')
    assert jsoncodec.dumps({"m": raw}) == b'{"m":{"role": "user",  "content": "hi"}}'
    assert jsoncodec.dumps([RawJSON(b"[1,2]")]) == b"[[1,2]]"


def test_a_raw_json_array_is_a_json_array_of_its_texts() -> None:
    encoded = jsoncodec.dumps({"messages": RawJSONArray(['{"a":1}', "2", '"x"'])})
    assert encoded == b'{"messages":[{"a":1},2,"x"]}'
    assert jsoncodec.dumps(RawJSONArray([])) == b"[]"


def test_raw_json_beside_a_big_integer_keeps_its_content() -> None:
    # The exact path cannot embed fragments: it must still write what they hold.
    document = {
        "n": 2**70,
        "m": RawJSON('{"k": 18446744073709551616}'),
        "ms": RawJSONArray(["1", '{"b":[true]}']),
    }
    assert same(
        jsoncodec.loads(jsoncodec.dumps(document)),
        {"n": 2**70, "m": {"k": 2**64}, "ms": [1, {"b": [True]}]},
    )


@PROPERTY
@given(st.lists(documents, max_size=3))
def test_a_raw_json_array_reads_back_as_its_documents(values: list[Any]) -> None:
    texts = [jsoncodec.dumps(v).decode() for v in values]
    assert same(jsoncodec.loads(jsoncodec.dumps(RawJSONArray(texts))), values)


def _nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def test_a_response_deeper_than_orjson_writes_is_written_by_the_stdlib() -> None:
    response = {"data": {"a": {"b": _nested(300)}}}
    assert jsoncodec.dumps(response) == json.dumps(response, separators=(",", ":")).encode()


def test_a_client_document_deeper_than_orjson_writes_is_refused() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        jsoncodec.dumps_document({"content": _nested(300)})


@pytest.mark.parametrize(
    "text",
    [
        b'{"n":0.30000000000000000001,"big":12345678901234567890.5}',
        # Beside an integer past 64 bits, which orjson alone cannot write.
        b'{"i":123456789012345678901234567890,"f":-1.0000000000000000000001e-300}',
        # No 16 digits in a row, yet 17 a float cannot hold (it is 12345678.12345679).
        b"[12345678.123456789]",
    ],
)
def test_a_number_with_more_digits_than_a_float_holds_comes_back_as_written(text: bytes) -> None:
    value = jsoncodec.loads(text)
    assert jsoncodec.dumps_document(value) == text
    assert jsoncodec.dumps(value) == text


@pytest.mark.parametrize(
    ("text", "exact"),
    [("0.30000000000000000001", True), ("0.3", False), ("2.50", False), ("1e5", False)],
)
def test_a_number_is_kept_with_its_text_only_when_a_float_would_change_it(
    text: str, exact: bool
) -> None:
    value = jsoncodec.exact_float(text)
    assert value == float(text)
    assert isinstance(value, jsoncodec.ExactFloat) is exact


def test_a_response_deeper_than_orjson_writes_keeps_a_stored_numbers_digits() -> None:
    stored = b"[" * 300 + b"0.30000000000000000001" + b"]" * 300
    written = jsoncodec.dumps({"data": jsoncodec.RawJSON(stored)})
    assert written == b'{"data":' + stored + b"}"


def test_a_document_with_an_integer_past_64_bits_is_written_as_before() -> None:
    # The standard library's text (1e-07, not orjson's 1e-7): a replace of a transcript
    # stored before compares the same digests.
    value = jsoncodec.loads(b'{"i":1180591620717411303424,"f":1e-07,"s":"\\u0000"}')
    assert jsoncodec.dumps(value) == b'{"i":1180591620717411303424,"f":1e-07,"s":"\\u0000"}'


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        # A number past a float's smallest normal: its text, when its float is another
        # number (1e-400 is 0.0, 4e-324 is 5e-324), as either path reads it. Both stored
        # the float: a silently different number.
        (b"1e-400", b"1e-400"),
        (b"4e-324", b"4e-324"),
        (b"-1e-400", b"-1e-400"),
        (b"1E-0400", b"1E-0400"),
        (b"2.2250738585072014e-309", b"2.2250738585072014e-309"),
        (b"4.9406564584124654e-324", b"4.9406564584124654e-324"),
        (b"1.2345e-320", b"1.2345e-320"),
        (b"0.00000000000001e-294", b"1e-308"),  # the float's own number: its shortest form
        # One whose float is that number is the float, as any other.
        (b"5e-324", b"5e-324"),
        (b"1e-310", b"1e-310"),
        (b"1.5E-310", b"1.5e-310"),
        (b"2.225073858507203e-309", b"2.225073858507203e-309"),
        (b"1e-100", b"1e-100"),
        (b"-0.0", b"-0.0"),
        # An exponent past what Decimal holds was an InvalidOperation (a 500 over HTTP).
        (b"0e99999999999999999999", b"0.0"),
        (b"-0.00e-99999999999999999999", b"-0.0"),
        (b"1e-99999999999999999999", b"1e-99999999999999999999"),
    ],
)
def test_a_number_is_stored_alike_on_both_paths(text: bytes, stored: bytes) -> None:
    alone = jsoncodec.dumps_document(jsoncodec.loads(b"[" + text + b"]"))
    beside = jsoncodec.dumps_document(jsoncodec.loads(b"[" + text + b",1234567890123456]"))
    assert alone == b"[" + stored + b"]"
    assert beside == b"[" + stored + b",1234567890123456]"


def test_a_uuid_takes_the_fast_path() -> None:
    # 4% of UUIDs hold a digit, e, a hyphen and three digits (`…1e-412…`): once they all
    # took the exact parser, 4 times slower.
    assert not jsoncodec._has_long_number(b'["0b6a1e-4123-4abc-8def-0123456789ab"]')
    assert not jsoncodec._has_long_number(b'["0b6a11e-412-41e-000000000000"]')
    assert not jsoncodec._has_long_number(b'{"n":1e-289,"m":-2.5e-100}')  # normal floats
    assert jsoncodec._has_long_number(b'{"n":1e-294}')
    assert jsoncodec._has_long_number(b"[1e-400 ]")
    assert jsoncodec._has_long_number(b"1e-400")


@pytest.mark.parametrize(
    "text",
    [
        b"1" * 4301,
        b"[-" + b"9" * 5000 + b"]",
        b'{"a":1234567890123456,"b":' + b"1" * 20_000 + b"}",
    ],
)
def test_an_integer_past_the_digits_python_reads_is_refused_saying_the_limit(text: bytes) -> None:
    # It was int()'s own ValueError, which the endpoint could only call "Unable to parse
    # request body as JSON".
    with pytest.raises(jsoncodec.NumberOutOfRange, match="at most 4300 digits"):
        jsoncodec.loads(text)


def test_a_document_of_many_long_integers_is_refused_saying_the_limit() -> None:
    """Each integer's conversion grows with the square of its length: 7,800 of 4,300
    digits (a 32 MB body) held the event loop three seconds."""
    many = b"[" + b",".join([b"7" * 4000] * 251) + b"]"
    with pytest.raises(jsoncodec.NumberOutOfRange, match="at most 1,000,000 digits"):
        jsoncodec.loads(many)
    fewer = b"[" + b",".join([b"7" * 4000] * 250) + b"]"  # exactly the limit
    assert len(jsoncodec.loads(fewer)) == 250
    # Short integers are not counted, however many.
    assert len(jsoncodec.loads(b"[" + b",".join([b"12345678901234567890"] * 100_000) + b"]")) == (
        100_000
    )


def test_an_integer_of_as_many_digits_as_python_reads_is_kept() -> None:
    text = b'{"n":-' + b"7" * 4300 + b"}"
    assert jsoncodec.dumps_document(jsoncodec.loads(text)) == text
    assert jsoncodec.exact_int("7" * 4300) == int("7" * 4300)
    with pytest.raises(jsoncodec.NumberOutOfRange, match="at most 4300 digits"):
        jsoncodec.exact_int("7" * 4301)


@pytest.mark.parametrize(("setting", "limit"), [("0", 4300), ("100000", 4300), ("640", 640)])
def test_the_digits_limit_holds_whatever_python_is_told(setting: str, limit: int) -> None:
    """PYTHONINTMAXSTRDIGITS=0 turns Python's guard off: the service then read integers of any
    length (a quadratic conversion of a whole body's digits). A lower setting is kept."""
    probe = (
        "import sys\n"
        "from graph.domain import jsoncodec\n"
        "limit = int(sys.argv[1])\n"
        "assert jsoncodec.loads(b'[' + b'7' * limit + b']') == [int('7' * limit)]\n"
        "for read in (lambda: jsoncodec.loads(b'[' + b'7' * (limit + 1) + b']'),\n"
        "             lambda: jsoncodec.exact_int('-' + '7' * (limit + 1))):\n"
        "    try:\n"
        "        read()\n"
        "    except jsoncodec.NumberOutOfRange as exc:\n"
        "        print(exc)\n"
    )
    env = {**os.environ, "PYTHONINTMAXSTRDIGITS": setting}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(limit)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    said = f"JSON integers may have at most {limit} digits\n"
    assert done.stdout == said * 2


@pytest.mark.parametrize("text", [b"[1e400]", b"[-1e99999]", b"[1e400,1234567890123456]"])
def test_a_number_past_a_floats_range_is_refused_saying_so(text: bytes) -> None:
    with pytest.raises(jsoncodec.NumberOutOfRange, match=r"finite: at most 1\.79"):
        jsoncodec.loads(text)


def test_the_bytes_of_a_surrogate_are_refused_on_both_paths() -> None:
    # json.loads decoded them (surrogatepass) where orjson refuses them: a lone surrogate
    # reached a search, which answered INTERNAL.
    for text in (b'["a\xed\xa0\x80"]', b'["a\xed\xa0\x80",1234567890123456]'):
        with pytest.raises(ValueError):
            jsoncodec.loads(text)


def test_leader_dots_take_the_fast_path() -> None:
    assert jsoncodec.loads(b'{"toc":"Chapter 1 ................ 5"}')["toc"].endswith("5")
    assert not jsoncodec._has_long_number(b'"Chapter 1 ................ 5"')
    assert jsoncodec._has_long_number(b"[12345678.123456789]")


def test_a_document_with_a_long_number_is_written_as_deep_as_the_standard_library_goes() -> None:
    # The walk that puts exact digits back took two frames a level: 490 levels at most.
    # (The integer first: orjson stops there, before its own nesting limit.)
    deep = b'{"n":1180591620717411303424,"x":' + b"[" * 900 + b"1" + b"]" * 900 + b"}"
    assert jsoncodec.dumps_document(jsoncodec.loads(deep)) == deep
    with pytest.raises(ValueError, match=r"^nested too deeply$"):  # not Python's words
        jsoncodec.dumps_document({"n": 2**70, "x": nested(3000, 1)})


def nested(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf
