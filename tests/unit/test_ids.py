"""Record ids: new ones are random UUIDv4s; any spelling of a UUID names its record, and
anything else names none (NOT_FOUND, never another error)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph.domain import ids
from graph.domain.errors import ErrorCode
from tests.unit.helpers import PROPERTY, raises_domain

UUID = "9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60"


def test_new_ids_are_canonical_random_uuid4s() -> None:
    made = {ids.new_id() for _ in range(1000)}
    assert len(made) == 1000
    for value in made:
        assert ids.canonical(value) == value
        assert uuid.UUID(value).version == 4


@PROPERTY
@given(st.uuids())
def test_every_spelling_of_a_uuid_reads_as_its_canonical_form(value: uuid.UUID) -> None:
    canonical = str(value)
    for spelling in (canonical, canonical.upper(), value.hex, "{" + canonical + "}", value.urn):
        assert ids.canonical(spelling) == canonical
        assert ids.parse(spelling, what="conversation", field="id") == canonical


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        UUID[:-1],
        UUID + "0",
        UUID.replace("-", "_"),
        "g" * 32,
        " " * 36,
        None,
        7,
        b"\x00" * 16,
        ["x"],
        "\x00" + UUID[1:],
    ],
    ids=repr,
)
def test_what_is_no_uuid_names_no_record(value: object) -> None:
    assert ids.canonical(value) is None
    with raises_domain(ErrorCode.NOT_FOUND, "conversationId") as info:
        ids.parse(value, what="conversation", field="conversationId")
    assert info.value.message == "conversation not found"


@PROPERTY
@given(st.text(alphabet="0123456789abcdefABCDEF-{}:urnid ", max_size=45))
def test_whatever_reads_as_an_id_is_canonical(text: str) -> None:
    found = ids.canonical(text)
    if found is not None:
        assert ids.canonical(found) == found
        assert len(found) == 36
        assert found == found.lower()


@PROPERTY
@given(
    st.one_of(
        st.uuids().map(str),
        st.text(alphabet="0123456789abcdefABCDEF-{}:urnid \n", min_size=30, max_size=40),
    )
)
def test_the_canonical_spelling_reads_as_uuid_reads_it(text: str) -> None:
    try:
        expected: str | None = str(uuid.UUID(text))
    except ValueError:
        expected = None
    assert ids.canonical(text) == expected
