"""Conversations: what a create, an update and a transcript save may set, expiry, locks and
pending conversations (the WordPress store's semantics)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph.domain import conversations
from graph.domain.conversations import KEEP, MAX_LOCK_TTL, root_of
from graph.domain.errors import ErrorCode
from tests.unit.helpers import PROPERTY, raises_domain

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def test_a_create_with_defaults() -> None:
    new = conversations.new_conversation(now=NOW)
    assert new.title is None
    assert new.agent_slug == ""
    assert new.meta == "{}"
    assert new.context == "chat"
    assert new.expires_at is None
    assert new.idempotency_key is None


def test_a_create_keeps_what_it_was_given() -> None:
    new = conversations.new_conversation(
        now=NOW,
        title="Plan",
        agent_slug="planner",
        metadata={"n": 2**64, "é": True},
        context="batch",
        expires_at=NOW + SECOND,
        idempotency_key="req-1",
    )
    assert (new.title, new.agent_slug, new.context) == ("Plan", "planner", "batch")
    assert new.meta == '{"n":18446744073709551616,"é":true}'
    assert new.expires_at == NOW + SECOND
    assert new.idempotency_key == "req-1"


@pytest.mark.parametrize(
    ("kwargs", "code", "field"),
    [
        ({"expires_at": NOW}, ErrorCode.INVALID_INPUT, "expiresAt"),
        ({"expires_at": NOW - SECOND}, ErrorCode.INVALID_INPUT, "expiresAt"),
        ({"idempotency_key": ""}, ErrorCode.INVALID_INPUT, "idempotencyKey"),
        ({"idempotency_key": "  "}, ErrorCode.INVALID_INPUT, "idempotencyKey"),
        ({"idempotency_key": "k" * 201}, ErrorCode.LIMIT_EXCEEDED, "idempotencyKey"),
        ({"context": ""}, ErrorCode.INVALID_INPUT, "context"),
        ({"context": "c" * 201}, ErrorCode.LIMIT_EXCEEDED, "context"),
        ({"agent_slug": "a" * 201}, ErrorCode.LIMIT_EXCEEDED, "agentSlug"),
        ({"agent_slug": "a\x00"}, ErrorCode.INVALID_INPUT, "agentSlug"),
        ({"title": "t\x00"}, ErrorCode.INVALID_INPUT, "title"),
        ({"metadata": [1]}, ErrorCode.INVALID_INPUT, "metadata"),
        ({"metadata": "{}"}, ErrorCode.INVALID_INPUT, "metadata"),
    ],
    ids=[
        "expiring now",
        "expired",
        "empty key",
        "blank key",
        "long key",
        "empty context",
        "long context",
        "long slug",
        "NUL slug",
        "NUL title",
        "list metadata",
        "metadata as text",
    ],
)
def test_a_create_refuses_naming_the_input(
    kwargs: dict[str, Any], code: ErrorCode, field: str
) -> None:
    with raises_domain(code, field):
        conversations.new_conversation(now=NOW, **kwargs)


def test_an_update_of_nothing_changes_nothing() -> None:
    assert conversations.update_changes(now=NOW) == {}


def test_an_update_sets_what_it_names_and_null_clears() -> None:
    changes = conversations.update_changes(
        now=NOW,
        title=None,
        provider="openai",
        model=None,
        provider_response_id="resp-1",
        metadata={"a": 1},
        expires_at=None,
    )
    assert changes == {
        "title": None,
        "provider": "openai",
        "model": None,
        "provider_response_id": "resp-1",
        "meta": '{"a":1}',
        "expires_at": None,
    }


def test_an_update_that_clears_metadata_leaves_an_empty_object() -> None:
    assert conversations.update_changes(now=NOW, metadata=None) == {"meta": "{}"}


def test_marking_read_records_the_time() -> None:
    assert conversations.update_changes(now=NOW, mark_read=True) == {"last_read_at": NOW}
    assert "last_read_at" not in conversations.update_changes(now=NOW, title="x")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"expires_at": NOW}, "expiresAt"),
        ({"title": "\x00"}, "title"),
        ({"provider": "\x00"}, "provider"),
        ({"model": "\x00"}, "model"),
        ({"provider_response_id": "\x00"}, "providerResponseId"),
        ({"metadata": 1}, "metadata"),
    ],
    ids=lambda v: str(v),
)
def test_an_update_refuses_naming_the_input(kwargs: dict[str, Any], field: str) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, field):
        conversations.update_changes(now=NOW, **kwargs)


def test_a_transcript_save_without_extras_sets_nothing_else() -> None:
    assert conversations.transcript_changes() == {}
    # Empty provider and model mean "unchanged", as WordPress's update_session has it.
    assert conversations.transcript_changes(provider="", model="", metadata=None) == {}


def test_a_transcript_save_sets_provider_model_metadata_and_response_id() -> None:
    assert conversations.transcript_changes(
        metadata={"k": "v"}, provider="anthropic", model="m-1", provider_response_id=None
    ) == {
        "meta": '{"k":"v"}',
        "provider": "anthropic",
        "model": "m-1",
        "provider_response_id": None,
    }
    assert conversations.transcript_changes(provider_response_id=KEEP) == {}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"provider": "\x00"}, "provider"),
        ({"model": "\x00"}, "model"),
        ({"provider_response_id": "\x00"}, "providerResponseId"),
        ({"metadata": ["x"]}, "metadata"),
    ],
    ids=lambda v: str(v),
)
def test_a_transcript_save_refuses_naming_the_input(kwargs: dict[str, Any], field: str) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, field):
        conversations.transcript_changes(**kwargs)


@pytest.mark.parametrize("ttl", [1, 300, MAX_LOCK_TTL])
def test_a_lock_runs_out_ttl_seconds_from_now(ttl: int) -> None:
    assert conversations.lock_expiry(ttl, NOW) == NOW + timedelta(seconds=ttl)


@pytest.mark.parametrize("ttl", [0, -1, MAX_LOCK_TTL + 1])
def test_a_lock_ttl_outside_one_second_to_a_day_is_invalid(ttl: int) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "ttlSeconds"):
        conversations.lock_expiry(ttl, NOW)


@pytest.mark.parametrize("token", ["a" * 32, "A-z_09" * 10, "f" * 128])
def test_a_url_safe_lock_token_of_32_to_128_characters_is_taken_as_it_is(token: str) -> None:
    assert conversations.check_lock_token(token) == token


@pytest.mark.parametrize("token", ["", "a" * 31, "a" * 129, "a" * 31 + "=", "a b" * 16, "ä" * 32])
def test_any_other_lock_token_is_invalid(token: str) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "token"):
        conversations.check_lock_token(token)


def test_an_acquire_refused_by_the_released_token_itself_is_a_conflict_on_the_token() -> None:
    refused = conversations.lock_refusal(digest="d", held_digest="d", locked_until=None)
    assert (refused.code, refused.field) == (ErrorCode.CONFLICT, ["token"])
    assert "released" in refused.message and "new token" in refused.message


@pytest.mark.parametrize(
    ("held_digest", "locked_until"),
    [("other", NOW + SECOND), ("d", NOW + SECOND), ("other", None), (None, None)],
)
def test_any_other_refused_acquire_is_locked(
    held_digest: str | None, locked_until: datetime | None
) -> None:
    """Held (by another, or found held by this digest after a race), or unheld since another
    token released it meanwhile: LOCKED, as before."""
    refused = conversations.lock_refusal(
        digest="d", held_digest=held_digest, locked_until=locked_until
    )
    assert (refused.code, refused.field) == (ErrorCode.LOCKED, ["conversationId"])


def test_the_pending_window_reaches_back_from_now() -> None:
    assert conversations.pending_since(600, NOW) == NOW - timedelta(minutes=10)
    assert conversations.pending_since(1, NOW) == NOW - SECOND
    for within in (0, -5):
        with raises_domain(ErrorCode.INVALID_INPUT, "withinSeconds"):
            conversations.pending_since(within, NOW)


@pytest.mark.parametrize(
    ("count", "locked_until", "pending"),
    [
        (0, None, True),
        (0, NOW - SECOND, True),
        (3, None, False),
        (3, NOW + SECOND, True),
        (3, NOW, False),  # a lock that runs out now no longer holds
        (3, NOW - SECOND, False),
    ],
)
def test_pending_means_empty_or_locked(
    count: int, locked_until: datetime | None, pending: bool
) -> None:
    assert conversations.is_pending(message_count=count, locked_until=locked_until, now=NOW) is (
        pending
    )


@pytest.mark.parametrize(
    ("context", "interactive"),
    [("chat", True), ("interactive", True), ("rest", True), ("batch", False), ("Chat", False)],
)
def test_interactive_contexts(context: str, interactive: bool) -> None:
    assert conversations.is_interactive(context) is interactive


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (None, []),
        ("", []),
        ("  \t ", []),
        ("\x00", []),
        ("hello  world", ["hello", "world"]),
        ("a\x00b", ["a", "b"]),
    ],
)
def test_search_words(text: str | None, words: list[str]) -> None:
    assert conversations.search_words(text) == words


@PROPERTY
@given(st.text())
def test_search_words_never_hold_blanks_or_nul(text: str) -> None:
    for word in conversations.search_words(text):
        assert word
        assert "\x00" not in word
        assert not any(c.isspace() for c in word)
        assert word in text


def test_a_tree_s_root_is_the_first_of_the_ancestry_or_the_conversation_itself() -> None:
    assert root_of("r", "") == "r"
    assert root_of("c", "r") == "r"
    assert root_of("g", "r c") == "r"


def test_a_search_holds_at_most_so_many_words() -> None:
    most = " ".join(["w"] * conversations.MAX_SEARCH_WORDS)
    assert len(conversations.search_words(most)) == conversations.MAX_SEARCH_WORDS
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "filter", "search"):
        conversations.search_words(most + " w")
    # One word of many parts is as many words of the index (a phrase on PostgreSQL: each
    # part nests the query, past PostgreSQL's stack at 50,000).
    with raises_domain(ErrorCode.LIMIT_EXCEEDED, "filter", "search"):
        conversations.search_words("-".join(["a"] * (conversations.MAX_SEARCH_WORDS + 1)))


def test_a_search_word_holds_at_most_what_postgresql_s_index_keeps() -> None:
    most = conversations.MAX_SEARCH_WORD_BYTES
    assert conversations.search_words("a " + "é" * most) == ["a", "é" * most]  # folded: `e`
    for search in ("y" * (most + 1), "ok " + "ж" * (most // 2 + 1), "brown-" + "y" * (most + 1)):
        with raises_domain(ErrorCode.LIMIT_EXCEEDED, "filter", "search"):
            conversations.search_words(search)


# -- the sweep's batches ----------------------------------------------------------------


def test_expired_conversations_group_under_their_topmost_expired_one() -> None:
    expired = [
        ("b", "a"),  # below a root that has not expired: it went alone
        ("c", "a b"),
        ("r", ""),
        ("s", "r"),
        ("t", "r s"),
        ("q", ""),
    ]
    trees = conversations.expired_trees(expired)
    assert [(t.top, t.members) for t in trees] == [
        ("b", ("b", "c")),
        ("q", ("q",)),
        ("r", ("r", "s", "t")),
    ]


def test_the_top_of_an_expired_conversation_is_its_highest_expired_ancestor() -> None:
    # The sweep reads a window of a backlog: what else expired is known apart from it.
    assert conversations.top_of("t", "r s", {"r", "s"}) == "r"
    assert conversations.top_of("t", "r s", {"s"}) == "s"  # below a root that lives on
    assert conversations.top_of("t", "r s", set()) == "t"
    assert conversations.top_of("r", "", {"x"}) == "r"


def test_a_top_comes_first_whatever_order_its_members_were_read_in() -> None:
    (tree,) = conversations.expired_trees([("t", "r s"), ("s", "r"), ("r", "")])
    assert tree.members[0] == "r" and set(tree.members) == {"r", "s", "t"}


def test_batches_hold_whole_trees_and_at_most_their_size() -> None:
    trees = conversations.expired_trees(
        [("a", ""), ("b", ""), ("b1", "b"), ("b2", "b"), ("c", ""), ("d", ""), ("e", "")]
    )
    batches = conversations.in_batches(trees, 3)
    assert [[t.top for t in batch] for batch in batches] == [["a"], ["b"], ["c", "d", "e"]]
    # A tree larger than a batch is one of its own, never split.
    big = conversations.expired_trees([("r", ""), *((f"r{n}", "r") for n in range(5))])
    assert [[len(t.members) for t in b] for b in conversations.in_batches(big, 2)] == [[6]]
    assert conversations.in_batches([], 3) == []


@given(st.lists(st.integers(min_value=1, max_value=9), max_size=30), st.integers(1, 12))
@PROPERTY
def test_every_tree_is_in_one_batch_in_order(sizes: list[int], size: int) -> None:
    expired = [
        (f"{n:03}-{m}", "" if m == 0 else f"{n:03}-0")
        for n, count in enumerate(sizes)
        for m in range(count)
    ]
    trees = conversations.expired_trees(expired)
    batches = conversations.in_batches(trees, size)
    assert [t for batch in batches for t in batch] == trees
    for batch in batches:
        held = sum(len(t.members) for t in batch)
        assert held <= size or len(batch) == 1
