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
