"""The JSON documents clients store (messages, snapshots, metadata): validated and encoded once."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from graph.domain import jsoncodec
from graph.domain.errors import DomainError, invalid, too_large

# The most tokens one message is taken to count: larger values are not a token count (and a
# sum of them could not be told apart from a real one). The migration that summed the stored
# messages (0006) applies the same rule in SQL.
MAX_MESSAGE_TOKENS = 2**31 - 1


class PreparedMessage(NamedTuple):
    """A message checked and encoded. A named tuple rather than a frozen dataclass: a save
    prepares thousands, and a frozen dataclass's constructor costs several times as much."""

    role: str
    encoded: bytes  # the message as compact JSON, exactly as sent
    digest: str
    message: dict[str, Any]

    # Only for the rows written: a transcript save compares 5,000 kept messages by digest.
    @property
    def text(self) -> str:
        return self.encoded.decode("utf-8")

    @property
    def search_text(self) -> str | None:
        return search_text(self.message)

    @property
    def token_count(self) -> int:
        return token_count(self.message)


def token_count(message: dict[str, Any]) -> int:
    """The message's top-level `token_count` when it carries one (an integer from 0 to
    MAX_MESSAGE_TOKENS; booleans, fractions and strings are not counts); else 0."""
    value = message.get("token_count")
    if type(value) is int and 0 <= value <= MAX_MESSAGE_TOKENS:
        return value
    return 0


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)


def search_text(message: dict[str, Any]) -> str | None:
    parts: list[str] = []
    _strings(message.get("content"), parts)
    # NUL has no place in a text index (and PostgreSQL's text type refuses it).
    text = " ".join(parts).replace("\x00", " ").strip()
    return text or None


def prepare_message(
    message: Any, *, field: list[str], max_bytes: int, allow_empty_role: bool = False
) -> PreparedMessage:
    if not isinstance(message, dict):
        raise invalid("a message must be a JSON object", *field)
    role = message.get("role")
    if not isinstance(role, str) or (not role.strip() and not allow_empty_role):
        raise invalid("a message needs a non-empty string `role`", *field)
    if "\x00" in role:
        # The role is also stored as a column of its own, and PostgreSQL text refuses NUL.
        raise invalid("a message's `role` must not contain NUL characters", *field)
    try:
        encoded = jsoncodec.dumps_document(message)
    except ValueError as exc:
        raise invalid(f"a message must be valid JSON text: {exc}", *field) from None
    if len(encoded) > max_bytes:
        raise too_large(
            f"a message may hold at most {max_bytes} bytes of JSON (this one: {len(encoded)})",
            *field,
        )
    return PreparedMessage(
        role, encoded, hashlib.blake2b(encoded, digest_size=16).hexdigest(), message
    )


def kept_prefix(stored: Sequence[str], new: Sequence[str]) -> int:
    """How many digests of a stored transcript the new one starts with: the messages a save
    keeps. A save that adds to the end (the usual one) is compared in one list comparison."""
    n = min(len(stored), len(new))
    if stored[:n] == new[:n]:
        return n
    return next(i for i in range(n) if stored[i] != new[i])


def prepare_messages(
    messages: list[Any], *, max_count: int, max_bytes: int, field: str = "messages"
) -> list[PreparedMessage]:
    """Validate every message before anything is written; errors name `[field, index]`."""
    if len(messages) > max_count:
        raise too_large(f"at most {max_count} messages per call (got {len(messages)})", field)
    prepared = []
    for i, m in enumerate(messages):
        try:
            prepared.append(prepare_message(m, field=[], max_bytes=max_bytes))
        except DomainError as exc:
            # The path is built only for the message that failed: 5,000 lists per save add up.
            exc.field = [field, str(i)]
            raise
    return prepared


def check_text(
    value: str | None, field: str, *, required: bool = False, max_len: int = 10_000
) -> None:
    """Plain string inputs: no NUL (PostgreSQL text refuses it), bounded, non-blank if required."""
    if value is None:
        if required:
            raise invalid(f"`{field}` is required", field)
        return
    if required and not value.strip():
        raise invalid(f"`{field}` must not be empty", field)
    if "\x00" in value:
        raise invalid(f"`{field}` must not contain NUL characters", field)
    if len(value) > max_len:
        raise too_large(f"`{field}` may hold at most {max_len} characters", field)
    if not is_utf8(value):
        raise invalid(f"`{field}` must be valid UTF-8 text", field)


def is_utf8(value: str) -> bool:
    """Whether `value` encodes as UTF-8: it holds no lone surrogate (from a JSON `\\ud800`
    escape, or a byte that was not UTF-8 read under PEP 383)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def encode_document(value: Any, field: str) -> str:
    try:
        return jsoncodec.dumps_document(value).decode("utf-8")
    except ValueError as exc:
        raise invalid(f"`{field}` must be valid JSON: {exc}", field) from None


def metadata_json(value: Any, field: str = "metadata") -> str:
    """A conversation's metadata: a JSON object (null means empty), as stored text."""
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise invalid("`metadata` must be a JSON object", field)
    return encode_document(value, field)
