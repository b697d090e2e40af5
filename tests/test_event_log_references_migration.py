"""Revision 0013: the event log's rows name an append's messages by seq (`seq_low`,
`seq_high`). Its downgrade prunes the rows that name messages, with every earlier row of
their tree (the code before it reads only copies), and leaves the other trees' logs whole;
after it again the server logs and replays appends as before."""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from graph.domain.principal import SYSTEM
from graph.settings import Settings
from graph.store import event_log
from tests.conftest import GraphQLClient, Server
from tests.migrations import columns_after
from tests.operations import append, create, touch
from tests.test_event_resume import logged


async def test_the_downgrade_prunes_what_names_messages_and_the_upgrade_names_them_again(
    server: Server, gql: GraphQLClient, settings: Settings
) -> None:
    root, other = await create(gql), await create(gql)
    await append(gql, root, "one")
    await touch(gql, root)
    await touch(gql, other)
    assert await logged(server, root) == [1, 2, 3]
    assert await logged(server, other) == [1, 2]

    def downgrade(config: Config) -> None:
        command.downgrade(config, "0012")

    columns = await columns_after(settings, "event_log", downgrade)
    assert "seq_low" not in columns and "seq_high" not in columns
    assert await logged(server, root) == [3]  # position 2 named "one": it and all before it
    assert await logged(server, other) == [1, 2]

    def upgrade(config: Config) -> None:
        command.upgrade(config, "head")

    columns = await columns_after(settings, "event_log", upgrade)
    assert {"seq_low", "seq_high"} <= set(columns)
    await append(gql, root, "two", "three")
    async with server.services.uow.read(SYSTEM) as repo:
        replayed = await event_log.after(repo.sql, root, 3, limit=10, workspace=("site", "1"))
    assert [e.position for e in replayed] == [4]
    assert [m.data for m in replayed[0].messages or ()] == [
        '{"role":"user","content":"two"}',
        '{"role":"user","content":"three"}',
    ]
