"""A conversation's writes are timed in the order of its versions on PostgreSQL, where a
writer takes its instant before it waits for the row (see store/repository/versions.py):
the interleavings the racing appends of test_concurrency.py leave to chance, made here in
order. Each: a unit of work takes its instant, another writes the row first, then the first
writes; the later version must not be timed before the earlier. (SQLite's writers hold the
whole database while they write: no such interleaving.)"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from graph.domain.delegations import DelegationStatus, NewDelegation
from graph.domain.events import EventKind
from graph.domain.messages import PreparedMessage, prepare_messages
from graph.domain.principal import Principal
from graph.store.unit_of_work import UnitOfWork
from tests.conftest import GraphQLClient, Server

CREATE = """mutation { createConversation(input: {title: "t"}) { conversation { id } } }"""


def said(text: str) -> list[PreparedMessage]:
    return prepare_messages([{"role": "user", "content": text}], max_count=10, max_bytes=10_000)


async def setup(server: Server, gql: GraphQLClient) -> tuple[UnitOfWork, Principal, str]:
    if server.settings.database_url.startswith("sqlite"):
        pytest.skip("PostgreSQL only: SQLite's writers hold the database")
    assert gql.token is not None
    principal = await server.services.uow.authenticate(gql.token)
    assert principal is not None
    cid: str = (await gql(CREATE))["createConversation"]["conversation"]["id"]
    return server.services.uow, principal, cid


async def test_a_delete_is_not_timed_before_the_write_it_follows(
    server: Server, gql: GraphQLClient
) -> None:
    uow, principal, cid = await setup(server, gql)
    async with uow.write(principal) as deleter:
        deleter.now()  # as the delete's first read takes it, before it waits for the row
        await asyncio.sleep(0.01)
        async with uow.write(principal) as writer:  # an append that gets the row first
            await writer.transcripts.append(cid, said("late"), expected_version=None)
            appended = writer.events[-1]
        assert await deleter.conversations.delete(cid)
        deleted = deleter.events[0]
    assert deleted.kind is EventKind.CONVERSATION_DELETED
    assert deleted.version > appended.version
    assert deleted.at >= appended.at, (deleted.at, appended.at)


async def test_a_roots_expiry_does_not_set_a_childs_time_back(
    server: Server, gql: GraphQLClient
) -> None:
    uow, principal, cid = await setup(server, gql)
    async with uow.write(principal) as repo:
        made = await repo.delegations.create(
            cid, NewDelegation(delegating_tier="a", target_tier="b", task="t", max_turns=None)
        )
    child = made.child_conversation_id
    async with uow.write(principal) as updater:
        updater.now()  # the root's update takes its instant, then waits for the root's row
        await asyncio.sleep(0.01)
        async with uow.write(principal) as writer:  # a write to the child gets in first
            await writer.transcripts.append(child, said("child"), expected_version=None)
            child_append = writer.events[-1]
        at = datetime.now(UTC) + timedelta(days=1)
        await updater.conversations.update(cid, {"expires_at": at}, expected_version=None)
        child_update = next(e for e in updater.events if e.conversation_id == child)
    assert child_update.version > child_append.version
    assert child_update.at >= child_append.at, (child_update.at, child_append.at)


async def test_a_completion_is_not_timed_before_the_parent_write_it_follows(
    server: Server, gql: GraphQLClient
) -> None:
    """A completion under a root: the root is locked by the parent's bump, after the
    completion took its instant (its completedAt)."""
    uow, principal, cid = await setup(server, gql)
    async with uow.write(principal) as repo:
        made = await repo.delegations.create(
            cid, NewDelegation(delegating_tier="a", target_tier="b", task="t", max_turns=None)
        )
    async with uow.write(principal) as completer:
        completer.now()  # complete()'s first params(), before the parent's row is waited for
        await asyncio.sleep(0.01)
        async with uow.write(principal) as writer:  # an append to the parent gets in first
            await writer.transcripts.append(cid, said("late"), expected_version=None)
            appended = writer.events[-1]
        done = await completer.delegations.complete(
            made.id, status=DelegationStatus.COMPLETED, summary="s"
        )
        event = completer.events[0]
    assert event.version > appended.version and event.at >= appended.at  # the event is raised
    assert done.completed_at is not None
    assert done.completed_at >= appended.at, (done.completed_at, appended.at, event.at)
