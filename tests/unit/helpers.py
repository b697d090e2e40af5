"""What several unit tests share: asserting a DomainError and a hypothesis budget.

tests/unit is the fast layer: the pure logic (domain rules, cursors, the JSON codec, the
scope rules, the query limits) tested as its callers rely on it, with no database, no
server and no network, so that `pytest tests/unit` runs in seconds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, settings

from graph.domain.errors import DomainError, ErrorCode

# Applied per test (never loaded as a profile, which would change every other suite's
# hypothesis settings): no deadline, since two busy cores make timings meaningless.
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def raises_domain(code: ErrorCode, *field: str) -> Iterator[pytest.ExceptionInfo[DomainError]]:
    """The block raises a DomainError with `code` naming exactly the input path `field`
    (or no field at all when none is given)."""
    with pytest.raises(DomainError) as info:
        yield info
    assert info.value.code is code, info.value.message
    assert info.value.field == (list(field) or None), info.value.field
