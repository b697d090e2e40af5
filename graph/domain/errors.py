"""Expected failures: raised by the domain and the store, returned to clients as `userErrors`."""

from __future__ import annotations

import enum
from typing import Any


class ErrorCode(enum.Enum):
    NOT_FOUND = "NOT_FOUND"
    INVALID_INPUT = "INVALID_INPUT"
    CONFLICT = "CONFLICT"
    LOCKED = "LOCKED"
    INVALID_TRANSITION = "INVALID_TRANSITION"
    POISONED_STATE = "POISONED_STATE"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    FORBIDDEN = "FORBIDDEN"
    # The database cannot take the write (disk full, quota reached); nothing was written.
    STORAGE_FULL = "STORAGE_FULL"
    CURSOR_EXPIRED = "CURSOR_EXPIRED"


class DomainError(Exception):
    """An expected failure with a code and the path of the offending input field."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        field: list[str] | None = None,
        *,
        extensions: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        # Told to the client beside the code and field (an event stream's last cursor).
        self.extensions = extensions or {}


def not_found(what: str, field: str | list[str]) -> DomainError:
    path = [field] if isinstance(field, str) else field
    return DomainError(ErrorCode.NOT_FOUND, f"{what} not found", path)


def invalid(message: str, *field: str) -> DomainError:
    return DomainError(ErrorCode.INVALID_INPUT, message, list(field) or None)


def too_large(message: str, *field: str) -> DomainError:
    return DomainError(ErrorCode.LIMIT_EXCEEDED, message, list(field) or None)


def conflict(expected: int, actual: int) -> DomainError:
    return DomainError(
        ErrorCode.CONFLICT,
        f"version is {actual}, not the expected {expected}",
        ["expectedVersion"],
    )


def count_conflict(expected: int, actual: int) -> DomainError:
    return DomainError(
        ErrorCode.CONFLICT,
        f"the conversation holds {actual} messages, not the expected {expected}",
        ["expectedMessageCount"],
    )


def forbidden(message: str = "this token may only read") -> DomainError:
    return DomainError(ErrorCode.FORBIDDEN, message)
