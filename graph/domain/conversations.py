"""Conversations: what a create, an update or a transcript save may set, and the rules of
locks and of a pending conversation (the WordPress store's semantics, see SEEDS.md)."""

from __future__ import annotations

import enum
import re
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from graph.domain.errors import DomainError, ErrorCode, invalid, too_large
from graph.domain.messages import check_text, metadata_json
from graph.domain.principal import OwnerType
from graph.domain.words import words as split

INTERACTIVE_CONTEXTS = frozenset({"chat", "interactive", "rest"})
DEFAULT_CONTEXT = "chat"
DEFAULT_LOCK_TTL = 300
MAX_LOCK_TTL = 24 * 3600
# A lock token a caller chooses: at least as long as the ones the server makes.
LOCK_TOKEN_MIN = 32
LOCK_TOKEN_MAX = 128
_LOCK_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
DEFAULT_PENDING_WINDOW = 600
# A search is a handful of words; past this many it is not one (and each word is a term
# of the index's query, a bind parameter on PostgreSQL).
MAX_SEARCH_WORDS = 100
# PostgreSQL's index keeps no word longer than this (its lexemes' limit, in UTF-8 bytes): it
# leaves such a word out of a message's words and out of a search's, where SQLite keeps it.
MAX_SEARCH_WORD_BYTES = 2047


class Keep(enum.Enum):
    """An input left out of an update: the stored value stays as it is."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True, slots=True, kw_only=True)
class NewConversation:
    """A validated createConversation."""

    title: str | None
    agent_slug: str
    meta: str  # the metadata object as JSON text
    context: str
    expires_at: datetime | None
    idempotency_key: str | None


def new_conversation(
    *,
    now: datetime,
    title: str | None = None,
    agent_slug: str = "",
    metadata: Any = None,
    context: str = DEFAULT_CONTEXT,
    expires_at: datetime | None = None,
    idempotency_key: str | None = None,
) -> NewConversation:
    check_text(title, "title")
    check_text(agent_slug, "agentSlug", max_len=200)
    check_text(context, "context", required=True, max_len=200)
    check_text(idempotency_key, "idempotencyKey", max_len=200)
    if idempotency_key is not None and not idempotency_key.strip():
        # A client sending "" every time would collapse all its creates into one.
        raise invalid("`idempotencyKey` must not be blank; omit it instead", "idempotencyKey")
    check_expiry(expires_at, now)
    return NewConversation(
        title=title,
        agent_slug=agent_slug,
        meta=metadata_json(metadata),
        context=context,
        expires_at=expires_at,
        idempotency_key=idempotency_key,
    )


def check_expiry(expires_at: datetime | None, now: datetime) -> None:
    if expires_at is not None and expires_at <= now:
        raise invalid("`expiresAt` must be in the future", "expiresAt")


def check_own_expiry(ancestry: str) -> None:
    """Only a root's expiry is set: the child transcripts below it live and die with it. A
    child expiring first would leave its delegation, still listed under the live parent,
    naming a transcript that is gone."""
    if ancestry:
        raise invalid(
            "a child transcript lives and dies with the conversation above it: "
            "set `expiresAt` on its root",
            "expiresAt",
        )


def update_changes(
    *,
    now: datetime,
    title: str | Keep | None = KEEP,
    metadata: Any | Keep = KEEP,
    provider: str | Keep | None = KEEP,
    model: str | Keep | None = KEEP,
    provider_response_id: str | Keep | None = KEEP,
    expires_at: datetime | Keep | None = KEEP,
    mark_read: bool = False,
) -> dict[str, Any]:
    """What an updateConversation sets, by the conversation's attribute names; left-out
    inputs stay as stored, an explicit null clears."""
    changes: dict[str, Any] = {}
    for name, attribute, value in (
        ("title", "title", title),
        ("provider", "provider", provider),
        ("model", "model", model),
        ("providerResponseId", "provider_response_id", provider_response_id),
    ):
        if value is not KEEP:
            check_text(value, name)
            changes[attribute] = value
    if metadata is not KEEP:
        changes["meta"] = metadata_json(metadata)
    if expires_at is not KEEP:
        check_expiry(expires_at, now)
        changes["expires_at"] = expires_at
    if mark_read:
        changes["last_read_at"] = now
    return changes


def transcript_changes(
    *,
    metadata: Any | Keep = KEEP,
    provider: str | None = None,
    model: str | None = None,
    provider_response_id: str | Keep | None = KEEP,
) -> dict[str, Any]:
    """What a replaceTranscript sets besides the transcript (WordPress's update_session):
    metadata when given, provider and model only when non-empty, the response id unless
    left out."""
    check_text(provider, "provider")
    check_text(model, "model")
    if provider_response_id is not KEEP:
        check_text(provider_response_id, "providerResponseId")
    changes: dict[str, Any] = {}
    if metadata is not KEEP and metadata is not None:
        changes["meta"] = metadata_json(metadata)
    if provider:
        changes["provider"] = provider
    if model:
        changes["model"] = model
    if provider_response_id is not KEEP:
        changes["provider_response_id"] = provider_response_id
    return changes


def lock_expiry(ttl_seconds: int, now: datetime) -> datetime:
    """When a lock taken now for `ttl_seconds` runs out."""
    if not 1 <= ttl_seconds <= MAX_LOCK_TTL:
        raise invalid(f"`ttlSeconds` must be between 1 and {MAX_LOCK_TTL}", "ttlSeconds")
    return now + timedelta(seconds=ttl_seconds)


def check_lock_token(token: str) -> str:
    """A lock token the caller chose: long and random enough that only its holder knows it
    (the one a retry of a lost answer sends again)."""
    if not LOCK_TOKEN_MIN <= len(token) <= LOCK_TOKEN_MAX or not _LOCK_TOKEN.fullmatch(token):
        raise invalid(
            f"`token` must be {LOCK_TOKEN_MIN} to {LOCK_TOKEN_MAX} characters of A-Z, a-z, "
            "0-9, `-` and `_`, chosen at random",
            "token",
        )
    return token


def lock_refusal(
    *, digest: str, held_digest: str | None, locked_until: datetime | None
) -> DomainError:
    """Why an acquire with the token of `digest` was refused, from the lock it met: the token
    was released (the row keeps a released token's digest with no expiry), or another holder
    has the lock. A released token never takes the lock again: a first attempt carried out
    after its retry took and released the lock would hold it for nobody until its TTL ends."""
    if locked_until is None and held_digest == digest:
        return DomainError(
            ErrorCode.CONFLICT,
            "this token was released and cannot take the lock again; choose a new token",
            ["token"],
        )
    return DomainError(ErrorCode.LOCKED, "another holder has an unexpired lock", ["conversationId"])


def pending_since(within_seconds: int, now: datetime) -> datetime:
    """The oldest creation time a retried request's pending conversation may have."""
    if within_seconds < 1:
        raise invalid("`withinSeconds` must be at least 1", "withinSeconds")
    return now - timedelta(seconds=within_seconds)


def is_pending(*, message_count: int, locked_until: datetime | None, now: datetime) -> bool:
    """Pending: nothing stored yet, or a writer holds an unexpired lock."""
    return message_count == 0 or (locked_until is not None and locked_until > now)


def root_of(conversation_id: str, ancestry: str) -> str:
    """The root of a conversation's tree, from its ancestry (the ids above it, root first,
    space-separated; empty for a root)."""
    return ancestry.split(" ", 1)[0] if ancestry else conversation_id


@dataclass(frozen=True, slots=True)
class ExpiredTree:
    """Expired conversations that go together: `top`, the topmost of them in its tree (a
    root, or a child transcript that expired alone), and `members`, `top` and every expired
    one below it (a child transcript's expiry is its root's)."""

    top: str
    members: tuple[str, ...]


def top_of(cid: str, ancestry: str, expired: Container[str]) -> str:
    """The topmost expired conversation of the tree of the expired conversation `cid` (whose
    ancestry is `ancestry`): the highest of its ancestors that `expired` holds, or itself. A
    sweep deletes it with everything below it."""
    return next((a for a in ancestry.split() if a in expired), cid)


def expired_trees(expired: Iterable[tuple[str, str]]) -> list[ExpiredTree]:
    """The (id, ancestry) expired conversations, grouped under their topmost expired one, in
    the order of the tops' ids."""
    ancestries = dict(expired)
    members: dict[str, list[str]] = {}
    for cid, ancestry in ancestries.items():
        members.setdefault(top_of(cid, ancestry, ancestries), []).append(cid)
    return [
        ExpiredTree(top, tuple(sorted(members[top], key=lambda m: m != top)))
        for top in sorted(members)
    ]


def in_batches(trees: Sequence[ExpiredTree], size: int) -> list[list[ExpiredTree]]:
    """`trees` in order, in batches of at most `size` conversations: a tree is never split,
    and one larger than `size` is a batch of its own."""
    batches: list[list[ExpiredTree]] = []
    held = 0
    for tree in trees:
        if not batches or held + len(tree.members) > size:
            batches.append([])
            held = 0
        batches[-1].append(tree)
        held += len(tree.members)
    return batches


def is_interactive(context: str) -> bool:
    return context in INTERACTIVE_CONTEXTS


def search_words(text: str | None) -> list[str]:
    """The words of a search; a search of none (blank, or NUL only) does not filter."""
    words = (text or "").replace("\x00", " ").split()
    # Counted as the index splits them: `a-b-c` is three words of one phrase.
    parts = [] if len(words) > MAX_SEARCH_WORDS else [p for w in words for p in split(w)]
    count = len(words) if len(words) > MAX_SEARCH_WORDS else len(parts)
    if count > MAX_SEARCH_WORDS:
        raise too_large(
            f"a search may hold at most {MAX_SEARCH_WORDS} words ({count} given)",
            "filter",
            "search",
        )
    # One search finds the same on both backends: a word PostgreSQL would drop is refused,
    # not searched for on SQLite alone (nor, beside other words, left out of PostgreSQL's).
    if any(len(p.encode()) > MAX_SEARCH_WORD_BYTES for p in parts):
        raise too_large(
            f"a search word may hold at most {MAX_SEARCH_WORD_BYTES} bytes of UTF-8",
            "filter",
            "search",
        )
    return words


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationQuery:
    """Which conversations a list asks for (`conversations(filter:)`)."""

    agent_slug: str | None = None
    context: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    root_only: bool = False
    search: str | None = None
    # (type, key): narrows a workspace-wide reader's list to one owner; ignored otherwise.
    owner: tuple[OwnerType, str] | None = None
    # Narrows any reader's list to one owner type: a workspace-wide reader's to the records
    # of that type, anyone else's own records to nothing when the type is not its own.
    owner_type: OwnerType | None = None
