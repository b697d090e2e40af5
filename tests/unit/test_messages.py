"""Messages and the other documents clients store: validated before anything is written,
encoded once, exactly as sent; every refusal names the offending input."""

from __future__ import annotations

from typing import Any

import pytest

from graph.domain import messages
from graph.domain.errors import ErrorCode
from tests.unit.helpers import raises_domain


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "hi", "score": float("inf")},
        {"role": "tool", "content": None, "parts": [{"p": float("nan")}]},
    ],
    ids=["inf", "nan beside a null"],
)
def test_a_message_with_a_non_finite_number_is_invalid_input(message: dict[str, Any]) -> None:
    # Regression: it was stored with the number turned into null.
    with raises_domain(ErrorCode.INVALID_INPUT, "messages", "1"):
        messages.prepare_messages(
            [{"role": "user", "content": "ok"}, message], max_count=10, max_bytes=10_000
        )


@pytest.mark.parametrize("encode", [messages.encode_document, messages.metadata_json])
def test_a_document_with_a_non_finite_number_is_invalid_input(encode: Any) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "metadata"):
        encode({"a": [float("-inf")]}, "metadata")


def prepare(message: Any, max_bytes: int = 10_000, **kwargs: Any) -> messages.PreparedMessage:
    return messages.prepare_message(message, field=["message"], max_bytes=max_bytes, **kwargs)


def test_a_message_is_encoded_exactly_as_sent() -> None:
    message = {"role": "assistant", "content": "é 😀", "n": 2**70, "z": None, "a": [1.5]}
    prepared = prepare(message)
    assert prepared.role == "assistant"
    assert prepared.encoded == (
        '{"role":"assistant","content":"é 😀",'
        '"n":1180591620717411303424,"z":null,"a":[1.5]}'.encode()
    )
    assert prepared.text == prepared.encoded.decode()
    assert prepared.message is message


def test_equal_messages_have_equal_digests_and_any_change_another() -> None:
    a = prepare({"role": "user", "content": "hi"})
    assert a.digest == prepare({"role": "user", "content": "hi"}).digest
    assert a.digest != prepare({"role": "user", "content": "hi "}).digest
    assert a.digest != prepare({"content": "hi", "role": "user"}).digest  # the order is kept
    assert len(a.digest) == 32
    int(a.digest, 16)


@pytest.mark.parametrize(
    "message",
    [
        "a string",
        ["role", "user"],
        None,
        {},
        {"content": "no role"},
        {"role": ""},
        {"role": "   "},
        {"role": 1},
        {"role": None},
        {"role": "us\x00er"},
        {"role": "user", "content": "\ud800"},
    ],
    ids=repr,
)
def test_what_is_no_valid_message_is_invalid_input_naming_it(message: Any) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "message"):
        prepare(message)


def test_an_empty_role_is_allowed_only_when_asked_and_must_still_be_text() -> None:
    assert prepare({"role": ""}, allow_empty_role=True).role == ""
    with raises_domain(ErrorCode.INVALID_INPUT, "message"):
        prepare({"content": "x"}, allow_empty_role=True)
    with raises_domain(ErrorCode.INVALID_INPUT, "message"):
        prepare({"role": "a\x00"}, allow_empty_role=True)


def test_a_message_may_hold_exactly_max_bytes_of_json() -> None:
    message = {"role": "user", "content": "é"}
    size = len('{"role":"user","content":"é"}'.encode())
    assert len(prepare(message, max_bytes=size).encoded) == size
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "message") as info:
        prepare(message, max_bytes=size - 1)
    assert str(size) in info.value.message


def test_a_batch_names_the_index_of_the_message_that_failed() -> None:
    batch = [{"role": "user"}, {"role": "user"}, {"role": ""}, {"role": 3}]
    with raises_domain(ErrorCode.INVALID_INPUT, "messages", "2"):
        messages.prepare_messages(batch, max_count=10, max_bytes=1000)
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "transcript", "1"):
        messages.prepare_messages(
            [{"role": "a"}, {"role": "a", "c": "x" * 100}],
            max_count=10,
            max_bytes=50,
            field="transcript",
        )


def test_a_batch_may_hold_max_count_messages_and_no_more() -> None:
    batch = [{"role": "user", "content": str(i)} for i in range(3)]
    prepared = messages.prepare_messages(batch, max_count=3, max_bytes=100)
    assert [p.message for p in prepared] == batch
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "messages"):
        messages.prepare_messages([*batch, {"role": "user"}], max_count=3, max_bytes=100)
    # Counted before any message is looked at.
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "messages"):
        messages.prepare_messages(["junk"] * 4, max_count=3, max_bytes=100)


def test_the_search_text_is_every_string_of_the_content() -> None:
    message = {
        "role": "assistant",
        "name": "not searched",
        "content": [{"type": "text", "text": "hello"}, {"nested": ["big", {"x": "world"}]}, 7],
    }
    assert prepare(message).search_text == "text hello big world"
    assert messages.search_text({"role": "user", "content": "a\x00b"}) == "a b"


@pytest.mark.parametrize("content", [None, "", "  ", [], {"n": 1}, "\x00"], ids=repr)
def test_a_message_without_text_has_no_search_text(content: Any) -> None:
    assert messages.search_text({"role": "user", "content": content}) is None


def test_check_text_accepts_ordinary_text_up_to_its_bound() -> None:
    messages.check_text(None, "title")
    messages.check_text("", "title")
    messages.check_text("x" * 10_000, "title")
    messages.check_text("é" * 5, "title", max_len=5)
    messages.check_text("ok", "title", required=True)


@pytest.mark.parametrize(
    ("value", "kwargs", "code"),
    [
        (None, {"required": True}, ErrorCode.INVALID_INPUT),
        ("", {"required": True}, ErrorCode.INVALID_INPUT),
        (" \t\n", {"required": True}, ErrorCode.INVALID_INPUT),
        ("a\x00b", {}, ErrorCode.INVALID_INPUT),
        ("x" * 10_001, {}, ErrorCode.LIMIT_EXCEEDED),
        ("xyz", {"max_len": 2}, ErrorCode.LIMIT_EXCEEDED),
        ("\udc80", {}, ErrorCode.INVALID_INPUT),
    ],
    ids=["missing", "empty", "blank", "NUL", "too long", "over its bound", "lone surrogate"],
)
def test_check_text_refuses_naming_the_field(value: Any, kwargs: Any, code: ErrorCode) -> None:
    with raises_domain(code, "agentSlug"):
        messages.check_text(value, "agentSlug", **kwargs)


def test_metadata_is_a_json_object_and_null_means_empty() -> None:
    assert messages.metadata_json(None) == "{}"
    assert messages.metadata_json({"k": [1, "é"]}) == '{"k":[1,"é"]}'
    for value in ([1], "x", 3, True):
        with raises_domain(ErrorCode.INVALID_INPUT, "metadata"):
            messages.metadata_json(value)


def test_encode_document_names_the_field_of_what_is_no_json() -> None:
    assert messages.encode_document([1, None, "x"], "state") == '[1,null,"x"]'
    with raises_domain(ErrorCode.INVALID_INPUT, "state"):
        messages.encode_document({"s": "\ud800"}, "state")
    with raises_domain(ErrorCode.INVALID_INPUT, "state"):
        messages.encode_document({"s": object()}, "state")


@pytest.mark.parametrize(
    ("stored", "new", "kept"),
    [
        ([], ["a"], 0),
        (["a", "b"], ["a", "b", "c"], 2),  # a save that adds to the end keeps everything
        (["a", "b", "c"], ["a", "b"], 2),  # a shorter transcript keeps what it starts with
        (["a", "b", "c"], ["a", "x", "c"], 1),  # the first difference ends what is kept
        (["a", "b"], ["x", "b"], 0),
        (["a", "b"], [], 0),
    ],
)
def test_a_save_keeps_the_stored_messages_the_new_transcript_starts_with(
    stored: list[str], new: list[str], kept: int
) -> None:
    assert messages.kept_prefix(stored, new) == kept
