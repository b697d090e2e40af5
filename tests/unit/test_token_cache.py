"""The token cache's rules: an entry answers only under the stamp it was read under, while
its token is live, and never after a write of this process to the tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from graph.domain.principal import OwnerType, Principal, Scope
from graph.store.repository.tokens import Live
from graph.store.token_cache import TokenCache

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
ALICE = Principal(
    token_id="t1",
    workspace_type="site",
    workspace_id="1",
    owner_type=OwnerType.USER,
    owner_key="alice",
    owner_digest="d",
    scopes=(Scope.READ, Scope.WRITE),
)


def test_no_stamp_no_cache() -> None:
    assert TokenCache().stamp(None) is None


def test_an_entry_answers_under_its_stamp_only() -> None:
    cache = TokenCache()
    stamp = cache.stamp((1, 7))
    assert stamp is not None
    cache.put("digest", Live(ALICE, None), stamp)
    assert cache.get("digest", stamp, NOW) is ALICE
    assert cache.get("other", stamp, NOW) is None
    moved = cache.stamp((1, 8))  # another process committed
    assert moved is not None
    assert cache.get("digest", moved, NOW) is None
    assert cache.get("digest", stamp, NOW) is None  # and it is gone


def test_an_entry_read_before_a_token_write_committed_never_answers() -> None:
    cache = TokenCache()
    before = cache.stamp((1, 7))
    assert before is not None
    cache.changed()  # a revoke commits while a lookup that began before it is under way
    cache.put("digest", Live(ALICE, None), before)
    after = cache.stamp((1, 7))
    assert after is not None and after != before
    assert cache.get("digest", after, NOW) is None


def test_an_entry_answers_until_its_token_expires() -> None:
    cache = TokenCache()
    stamp = cache.stamp((1, 7))
    assert stamp is not None
    cache.put("digest", Live(ALICE, NOW + timedelta(seconds=1)), stamp)
    assert cache.get("digest", stamp, NOW + timedelta(milliseconds=999)) is ALICE
    assert cache.get("digest", stamp, NOW + timedelta(seconds=1)) is None


def test_the_cache_is_bounded() -> None:
    cache = TokenCache()
    stamp = cache.stamp((1, 7))
    assert stamp is not None
    for i in range(TokenCache.LIMIT + 1):
        cache.put(f"d{i}", Live(ALICE, None), stamp)
    assert cache.get("d0", stamp, NOW) is None
    assert cache.get(f"d{TokenCache.LIMIT}", stamp, NOW) is ALICE
