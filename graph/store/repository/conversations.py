"""Conversations: create, read, list, update, delete, locks and the pending-session lookup."""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable, Sequence
from datetime import datetime

from sqlalchemy import (
    JSON,
    ColumnElement,
    Select,
    and_,
    bindparam,
    case,
    cast,
    delete,
    false,
    func,
    not_,
    or_,
    select,
    tuple_,
    update,
)

from graph.domain import cursors, ids, jsoncodec
from graph.domain.conversations import (
    ConversationQuery,
    ExpiredTree,
    NewConversation,
    check_own_expiry,
    expired_trees,
    lock_expiry,
    pending_since,
    root_of,
    search_words,
    top_of,
)
from graph.domain.errors import not_found
from graph.domain.events import EventKind
from graph.domain.paging import Page
from graph.store import event_log, scope
from graph.store.encryption import conversation_ref, sealed_changes
from graph.store.keyring import new_lock_token
from graph.store.quotas import usage_of_row
from graph.store.repository import search
from graph.store.repository.base import Part, alive
from graph.store.repository.versions import CONVERSATIONS, after_last_write
from graph.store.sql import IDS_PER_STATEMENT, Prepared, Rows
from graph.store.tables import Conversation
from graph.store.tables import conversation as C
from graph.store.tables import delegation as D
from graph.store.tables import message as M

# A conversation's place in a page (newest first): its keyset cursor.
_page_key = tuple_(C.c.created_at, C.c.id)
_NEWEST_FIRST = (C.c.created_at.desc(), C.c.id.desc())
_OLDEST_FIRST = (C.c.created_at.asc(), C.c.id.asc())

IDEMPOTENCY_KEY = [
    "workspace_type",
    "workspace_id",
    "owner_type",
    "owner_digest",
    "idempotency_key",
]


class Conversations(Part):
    # -- reads -------------------------------------------------------------

    async def get(self, conversation_id: str) -> Conversation | None:
        return (await self.get_many([conversation_id])).get(conversation_id)

    async def get_many(self, given: Sequence[str]) -> dict[str, Conversation]:
        """Readable conversations by id; keys are the ids as given."""
        wanted = ids.spellings(given)
        if not wanted:
            return {}
        found = await self.sql.rows(
            _by_ids(self.reach(C, scope.Access.READ)), self.params(ids=list(wanted))
        )
        rows = CONVERSATIONS.many(found.keys, found.values)
        return {spelled: c for c in rows for spelled in wanted[c.id]}

    async def find(
        self, query: ConversationQuery, *, first: int, after: str | None
    ) -> Page[Conversation]:
        """A page of readable conversations, newest first."""
        words = await self._search_terms(query)
        listed = self._listed(query)
        many = bool(words) and self.sql.is_sqlite
        if many:
            many = (await self.sql.rows(search.many_hits(words))).first() is not None
        mark = None if after is None else tuple_(*cursors.keyset(after, "after"))
        older = listed if mark is None else listed.where(_page_key < mark)
        found = await self._matching_in_order(older, words, first + 1, many=many)
        items = CONVERSATIONS.many(found.keys, found.values[:first])
        newer = False
        if mark is not None:
            # With `after`, whether the list holds a conversation at or past the cursor (the
            # Relay spec's edges before it): one read before those were deleted may have none
            # left, where a cursor alone said there was one (sessionStateHistory likewise).
            at_or_past = listed.where(_page_key >= mark)
            nearest = await self._matching_in_order(
                at_or_past, words, 1, many=many, newest_first=False
            )
            newer = bool(nearest.values)
        return Page(
            items=items,
            cursors=[cursors.encode_keyset(c.created_at, c.id) for c in items],
            has_next_page=len(found.values) > first,
            has_previous_page=newer,
        )

    async def _matching_in_order(
        self,
        listed: Select[tuple[Conversation]],
        words: list[str],
        limit: int,
        *,
        many: bool,
        newest_first: bool = True,
    ) -> Rows:
        """The first `limit` of the `listed` conversations holding the search's `words` (every
        one without a search), newest or oldest first; `many`: the words have many hits
        (SQLite), and are found by walking the conversations."""
        if many:
            return await self._walk(listed, words, limit, newest_first=newest_first)
        if words:
            listed = listed.where(self._matches(words))
        return await self._in_order(listed, limit, newest_first=newest_first)

    async def _in_order(
        self, statement: Select[tuple[Conversation]], limit: int, *, newest_first: bool = True
    ) -> Rows:
        order = _NEWEST_FIRST if newest_first else _OLDEST_FIRST
        return await self.sql.rows(statement.order_by(*order).limit(limit), self.params())

    async def _walk(
        self,
        listed: Select[tuple[Conversation]],
        words: list[str],
        limit: int,
        *,
        newest_first: bool = True,
    ) -> Rows:
        """The page of a word with many hits (SQLite): the conversations in page order, each
        probed for a matching message, through a window of WALK_WINDOW of them; past it, the
        rest hits first (see repository/search.py)."""
        order = _NEWEST_FIRST if newest_first else _OLDEST_FIRST
        floor_row = (
            await self.sql.rows(
                listed.with_only_columns(C.c.created_at, C.c.id)
                .order_by(*order)
                .limit(1)
                .offset(search.WALK_WINDOW - 1),
                self.params(),
            )
        ).first()
        floor = None if floor_row is None else tuple_(*floor_row)
        walked = listed.where(search.has_matching_message(C.c.id, words))
        if floor is not None:
            walked = walked.where(_page_key >= floor if newest_first else _page_key <= floor)
        found = await self._in_order(walked, limit, newest_first=newest_first)
        if len(found.values) < limit and floor is not None:
            beyond = _page_key < floor if newest_first else _page_key > floor
            rest = listed.where(beyond, self._matches(words))
            more = await self._in_order(rest, limit - len(found.values), newest_first=newest_first)
            found = Rows(found.keys, found.values + more.values)
        return found

    async def count(self, query: ConversationQuery) -> int:
        matching = self._matching(query, await self._search_terms(query))
        statement = select(func.count()).select_from(matching.subquery())
        return int((await self.sql.rows(statement, self.params())).scalars()[0])

    async def _search_terms(self, query: ConversationQuery) -> list[str]:
        """The words to look for in the index: with encryption, their keyed digests."""
        words = search_words(query.search)
        if words and (encryption := self.sql.encryption) is not None:
            return (await encryption.ready()).query(words)
        return words

    def _listed(self, query: ConversationQuery) -> Select[tuple[Conversation]]:
        """The readable conversations that the query's filters, all but its search, select."""
        clauses: list[ColumnElement[bool]] = [self.where(C, scope.Access.READ), alive(C)]
        if query.owner is not None and self.reach(C, scope.Access.READ) is scope.Reach.WORKSPACE:
            owner_type, key = query.owner
            clauses.append(scope.one_owner(C, owner_type, self.repo.keyring.owner_digest(key)))
        if query.owner_type is not None:
            clauses.append(scope.owner_type_is(C, query.owner_type))
        if query.agent_slug is not None:
            clauses.append(_equals(C.c.agent_slug, query.agent_slug))
        if query.context is not None:
            clauses.append(_equals(C.c.context, query.context))
        if query.created_after is not None:
            clauses.append(C.c.created_at > query.created_after)
        if query.created_before is not None:
            clauses.append(C.c.created_at < query.created_before)
        if query.root_only:
            clauses.append(C.c.parent_delegation_id.is_(None))
        return select(C).where(*clauses)

    def _matches(self, words: list[str]) -> ColumnElement[bool]:
        return C.c.id.in_(search.conversations_matching(words, sqlite=self.sql.is_sqlite))

    def _matching(self, query: ConversationQuery, words: list[str]) -> Select[tuple[Conversation]]:
        listed = self._listed(query)
        return listed.where(self._matches(words)) if words else listed

    async def recent_pending(
        self, *, within_seconds: int, context: str, token_id: str | None
    ) -> Conversation | None:
        """The caller's newest conversation for `context` created in the window, if pending."""
        now = self.repo.now()
        statement = select(C).where(
            self.where(C, scope.Access.OWN),
            alive(C),
            _equals(C.c.context, context),
            C.c.created_at >= pending_since(within_seconds, now),
            # A delegation's child transcript is not a session a client could be retrying.
            C.c.parent_delegation_id.is_(None),
        )
        # Only the newest one counts: an older pending session is not a retry of this request.
        if token_id is None:
            found = await self.sql.rows(statement.order_by(*_NEWEST_FIRST).limit(1), self.params())
            newest = CONVERSATIONS.many(found.keys, found.values)
        elif self.sql.encryption is not None:
            # Sealed metadata cannot be matched in SQL: the conversations are opened here.
            newest = await self._newest_matching(
                statement,
                lambda c: _metadata_value_is(c.meta, "token_id", token_id),
                page=_SEALED_CANDIDATES,
            )
        else:
            newest = await self._newest_matching(
                statement.where(self._metadata_equals("token_id", token_id)),
                lambda c: _matched_by_text(c.meta, "token_id", token_id),
                page=1,
            )
        if not newest or not newest[0].pending(now):
            return None
        return newest[0]

    async def _newest_matching(
        self,
        statement: Select[tuple[Conversation]],
        matches: Callable[[Conversation], bool],
        *,
        page: int,
    ) -> list[Conversation]:
        """The newest conversation `statement` selects that `matches`, or none: read newest
        first, `page` at a time, until one matches (however many newer ones do not)."""
        rest = statement
        while True:
            found = await self.sql.rows(rest.order_by(*_NEWEST_FIRST).limit(page), self.params())
            candidates = CONVERSATIONS.many(found.keys, found.values)
            for candidate in candidates:
                if matches(candidate):
                    return [candidate]
            if len(candidates) < page:
                return []
            last = candidates[-1]
            rest = statement.where(_page_key < tuple_(last.created_at, last.id))

    def _metadata_equals(self, key: str, value: str) -> ColumnElement[bool]:
        """A top-level metadata value equals `value` as text (a number too); for a document
        holding \\u0000 on PostgreSQL, a candidate that `_matched_by_text` confirms."""
        if "\x00" in value:
            return false()  # as _equals: a value holding NUL matches nothing, on both backends
        # Only a string or a number matches (a number by its JSON text, as stored: digits
        # past 64 bits too); `true` is not "true" nor "1".
        if self.sql.is_sqlite:
            path = f"$.{key}"
            kind = func.json_type(C.c.metadata, path)
            return or_(
                and_(kind == "text", _equals(func.json_extract(C.c.metadata, path), value)),
                and_(
                    kind.in_(("integer", "real")),
                    _equals(C.c.metadata.op("->")(path), value),
                ),
            )
        # json, not jsonb: the stored text may hold \u0000, which jsonb refuses. PostgreSQL
        # cannot read any field of a document holding one (its json parser refuses to make
        # text of it), whichever row the plan reaches first: such a document is matched by
        # its text instead, the key and the value's JSON side by side.
        named = jsoncodec.dumps(key).decode()
        needles = [f"{named}:{jsoncodec.dumps(value).decode()}"]
        if _JSON_NUMBER.fullmatch(value):
            # A number's text as stored (compact), ended by the next member or the object's.
            needles += [f"{named}:{value}{end}" for end in ",}"]
        return case(
            (
                func.strpos(C.c.metadata, "\\u0000") > 0,
                or_(*(C.c.metadata.contains(n, autoescape=True) for n in needles)),
            ),
            else_=and_(
                func.json_typeof(cast(C.c.metadata, JSON)[key]).in_(("string", "number")),
                _equals(cast(C.c.metadata, JSON)[key].as_string(), value),
            ),
        )

    # -- writes ------------------------------------------------------------

    async def create(
        self,
        new: NewConversation,
        *,
        conversation_id: str | None = None,
        below: Conversation | None = None,
        announce: bool = True,
    ) -> Conversation:
        """A conversation owned by the caller, or a child transcript `below` a conversation
        (owned as its tree is); a retry with its idempotency key returns the first one."""
        now = self.repo.now()
        owner = (
            scope.owner_values(self.principal) if below is None else scope.inherited_owner(below)
        )
        ancestry = () if below is None else (*below.ancestors, below.id)
        new_id = conversation_id or ids.new_id()
        values = {
            "id": new_id,
            **owner,
            "title": new.title,
            "agent_slug": new.agent_slug,
            "context": new.context,
            "metadata": new.meta,
            "version": 1,
            "message_count": 0,
            "token_count": 0,
            "parent_delegation_id": None,
            "ancestry": " ".join(ancestry),
            "created_at": now,
            "updated_at": now,
            "expires_at": new.expires_at,
            "idempotency_key": new.idempotency_key,
        }
        if (encryption := self.sql.encryption) is not None:
            # The key is stored first: the row cannot commit without it.
            await encryption.seal_values(conversation_ref(new_id), values, _SEALED)
        if new.idempotency_key is None:
            found = await self.sql.rows(C.insert().values(values).returning(*C.c))
        else:
            holder = and_(
                self.where(C, scope.Access.OWN), C.c.idempotency_key == new.idempotency_key
            )
            # An expired holder of the key is gone for every read: the key starts a new one.
            # Deleted as the sweep would have: its quota given back, its subscribers told.
            await self._delete_gone(and_(holder, not_(alive(C))), with_below=True)
            # A retry with the same key returns the first conversation, even when two
            # replicas race: the unique constraint decides, the loser reads the winner.
            statement = (
                self.insert(C)
                .values(values)
                .on_conflict_do_nothing(index_elements=IDEMPOTENCY_KEY)
                .returning(*C.c)
            )
            found = await self.sql.rows(statement)
            if not found.values:
                first = await self.sql.rows(select(C).where(holder), self.params())
                return CONVERSATIONS.many(first.keys, first.values)[0]
        record = CONVERSATIONS.many(found.keys, found.values)[0]
        if announce:
            self.repo.publish(EventKind.CONVERSATION_UPDATED, record)
        return record

    async def update(
        self, conversation_id: str, changes: dict[str, object], *, expected_version: int | None
    ) -> Conversation:
        if (encryption := self.sql.encryption) is not None:
            changes = await sealed_changes(encryption, conversation_id, changes)
        record = await self.repo.versions.bump(
            conversation_id, expected_version=expected_version, values=changes
        )
        below: list[Conversation] = []
        if "expires_at" in changes:
            check_own_expiry(record.ancestry)  # raised: the unit of work writes nothing
            below = await self._expire_below(record, changes["expires_at"])
        self.repo.publish(EventKind.CONVERSATION_UPDATED, record)
        for child in below:
            self.repo.publish(EventKind.CONVERSATION_UPDATED, child)
        return record

    async def _expire_below(self, root: Conversation, expires_at: object) -> list[Conversation]:
        """Child transcripts live and die with the conversation above them: each one below
        `root` whose expiry this changes takes it, and as it is a change to its `expiresAt`,
        its version moves (a client caching it by version, the inspector open on it, kept the
        old expiry, told nothing). The changed ones, as written."""
        expiry = bindparam("expires_at", type_=C.c.expires_at.type)
        now = bindparam("now", type_=C.c.updated_at.type)
        found = await self.sql.rows(
            update(C)
            .where(
                C.c.workspace_type == root.workspace_type,
                C.c.workspace_id == root.workspace_id,
                (" " + C.c.ancestry + " ").like(f"% {root.id} %"),
                C.c.expires_at.is_distinct_from(expiry),
            )
            .values(expires_at=expiry, version=C.c.version + 1, updated_at=after_last_write(now))
            .returning(*C.c),
            self.params(expires_at=expires_at),
        )
        changed = CONVERSATIONS.many(found.keys, found.values)
        for child in changed:  # their events are timed in their versions' order
            self.repo.not_before(child.updated_at)
        # Told top down, siblings oldest first: not in the order the rows happened to come.
        return sorted(changed, key=lambda c: (len(c.ancestors), c.created_at, c.id))

    async def delete(self, conversation_id: str) -> bool:
        """Delete one of the caller's conversations (and all below it); False if none."""
        cid = ids.canonical(conversation_id)
        if cid is None:
            return False
        # Read before the tree's root is locked: a plain read locks nothing, and its
        # ancestry names the root (lock_tree need not read it again).
        doomed = await self.sql.rows(
            select(C.c.ancestry).where(C.c.id == cid, self.where(C, scope.Access.WRITE), alive(C)),
            self.params(),
        )
        if not doomed.values:
            return False
        ancestry: str = doomed.values[0][0]
        await self.lock_tree(cid, ancestry=ancestry)
        await self._keep_logged_messages([(cid, ancestry)])
        below = await self._below(cid) if self.sql.encryption is not None else []
        quotas_on = self.repo.settings.quotas_on
        # Each conversation of the tree: (id, ancestry, messages, bytes the quotas count).
        tree = []
        if self.sql.is_sqlite or quotas_on:
            tree = (await self.sql.rows(_usage_of_trees([cid]))).values
        await self._delete_messages_in_shares([(c, n) for c, _, n, _ in tree])
        found = await self.sql.rows(
            delete(C)
            .where(C.c.id == cid, self.where(C, scope.Access.WRITE), alive(C))
            .returning(*C.c),
            self.params(),
        )
        if not found.values:
            return False
        deleted = CONVERSATIONS.many(found.keys, found.values)[0]
        if self.sql.encryption is not None:
            self.repo.shredded.extend(conversation_ref(c) for c in [cid, *below])
        if quotas_on:
            messages, size = sum(n for _, _, n, _ in tree), sum(b for *_, b in tree)
            self.repo.usage.freed(deleted, messages=messages, size=size)
        else:
            self.repo.usage.deleted(deleted)  # kept right if an earlier run counted it
        # When it was deleted: not before its last write (whose instant may be later than
        # this unit of work's, taken before it had the row: see versions._statement).
        self.repo.not_before(deleted.updated_at)
        self.repo.publish(EventKind.CONVERSATION_DELETED, deleted, at=self.repo.now())
        await self._parent_lost_one(deleted)
        return True

    async def _parent_lost_one(self, deleted: Conversation) -> None:
        """After a child transcript's delete: it took its delegation with it (the foreign key
        cascades), so the parent lists one fewer, a change to the parent as a new delegation
        is (Delegations.create). Its version moves and its subscribers are told, also those
        that leave the descendants out: a client caching it by version kept the delegation.
        The conversations above the parent do not move (a delegation made below them does
        not either)."""
        if deleted.ancestors:
            *above, parent_id = deleted.ancestors
            await self.repo.versions.touch(parent_id, ancestry=" ".join(above))

    async def expired(self, now: datetime, *, first: int) -> list[ExpiredTree]:
        """Retention (the process only): the trees of the `first` conversations to have
        expired, each whole: its topmost expired conversation and every expired one below it,
        those past the `first` too. The sweep reads a backlog a window at a time: reading all
        of it at once held the event loop (SQLite) and the memory for as long as the backlog
        was large. The earliest expiries come first, in the index's order among equal ones
        (an order by id too sorted every conversation of that expiry again, each window)."""
        window = await self.sql.rows(
            select(C.c.id, C.c.ancestry)
            .where(self._expired(now))
            .order_by(C.c.expires_at)
            .limit(first),
            self.params(),
        )
        ancestries: dict[str, str] = dict(window.values)
        # Which of their ancestors outside the window expired too: the tree of each goes
        # from its topmost expired one.
        expired = set(ancestries)
        above = sorted({a for ancestry in ancestries.values() for a in ancestry.split()} - expired)
        for start in range(0, len(above), IDS_PER_STATEMENT):
            found = await self.sql.rows(
                select(C.c.id).where(
                    self._expired(now), C.c.id.in_(above[start : start + IDS_PER_STATEMENT])
                ),
                self.params(),
            )
            expired.update(found.scalars())
        tops = sorted({top_of(cid, ancestry, expired) for cid, ancestry in ancestries.items()})
        if not tops:
            return []
        members = await self.sql.rows(
            select(C.c.id, C.c.ancestry).where(self._expired(now), C.c.id.in_(_trees(tops))),
            self.params(),
        )
        return expired_trees(members.values)

    async def delete_expired(self, now: datetime, trees: Sequence[ExpiredTree]) -> int:
        """Retention: delete the conversations of `trees` still past their expiry (a write
        may have extended one since they were read), with everything below them; how many
        went."""
        # The tops and what is below them, found again (without binding every member: past
        # 32,766 of them no statement would take them).
        of_trees = C.c.id.in_(_trees([tree.top for tree in trees]))
        return await self._delete_gone(and_(self._expired(now), of_trees))

    def _expired(self, now: datetime) -> ColumnElement[bool]:
        return and_(
            self.where(C, scope.Access.WRITE), C.c.expires_at.is_not(None), C.c.expires_at <= now
        )

    async def _delete_gone(self, gone: ColumnElement[bool], *, with_below: bool = False) -> int:
        """Delete the expired conversations `gone` selects (and all below them); how many of
        them went.

        Each tree is announced as an explicit delete announces it: one CONVERSATION_DELETED,
        of the topmost conversation it lost. A child transcript expires with its root, and
        which of them the statement's RETURNING holds depends on the order the cascade meets
        them (SQLite deletes the children first, through the root; PostgreSQL returns every
        one): announcing what it returned sent a root's stream one event on SQLite and three
        on PostgreSQL.

        `with_below` (a create over an expired holder of its key, one conversation): the keys
        of what the delete cascades to below them go too, as an explicit delete's do; the
        sweep's selection holds its trees' child transcripts (their expiry is their root's),
        and the sweep's key collection finds the keys of the rest."""
        selected = await self.sql.rows(
            select(C.c.id, C.c.ancestry, C.c.message_count).where(gone), self.params()
        )
        if not selected.values:
            return 0
        doomed = [(cid, ancestry) for cid, ancestry, _ in selected.values]
        await event_log.lock_trees(self.sql, doomed)  # the roots first, as every write
        quotas_on = self.repo.settings.quotas_on
        # With quotas on, what each tree holds comes off its workspace's usage, as an
        # explicit delete's does: counting the workspace again read all of it, each share.
        held = await self._held_by_trees(doomed) if quotas_on else {}
        await self._keep_logged_messages(doomed)
        below: dict[str, list[str]] = {}
        if with_below and self.sql.encryption is not None:
            below = {cid: await self._below(cid) for cid, _ in doomed}
        await self._delete_messages_in_shares([(cid, n) for cid, _, n in selected.values])
        found = await self.sql.rows(delete(C).where(gone).returning(*C.c), self.params())
        expired = CONVERSATIONS.many(found.keys, found.values)
        returned = {c.id for c in expired}
        # What went: the rows the delete returned, and those selected below them (SQLite's
        # cascade takes a root's child transcripts before the statement reaches them). Not
        # every one selected: on PostgreSQL a write that extended one's expiry may have
        # committed between the selection and the delete, which checks the expiry again.
        went = returned | {
            cid for cid, ancestry in doomed if not returned.isdisjoint(ancestry.split())
        }
        if self.sql.encryption is not None:
            # Their keys too, and (with_below) those of what the delete cascaded to below them;
            # the rest of that, the sweep's key collection finds.
            cascaded = {c for cid in went for c in below.get(cid, ())}
            self.repo.shredded.extend(conversation_ref(cid) for cid in went | cascaded)
        for conversation in expired:
            if not quotas_on:
                self.repo.usage.deleted(conversation)  # kept right if an earlier run counted
            if went.isdisjoint(conversation.ancestors):
                if quotas_on:
                    messages, size = held.get(conversation.id, (0, 0))
                    self.repo.usage.freed(conversation, messages=messages, size=size)
                self.repo.not_before(conversation.updated_at)
                self.repo.publish(EventKind.CONVERSATION_DELETED, conversation, at=self.repo.now())
                # A child transcript that expired alone (its own expiry, set by a release
                # before they were refused) leaves its parent as an explicit delete does.
                await self._parent_lost_one(conversation)
        return len(went)

    async def _held_by_trees(self, doomed: Sequence[tuple[str, str]]) -> dict[str, tuple[int, int]]:
        """What the tree under each topmost of the (id, ancestry) conversations `doomed`
        holds, all of it (what is below it and lives on goes with it): the messages and bytes
        that its workspace's usage counts, by the top's id."""
        ids = {cid for cid, _ in doomed}
        tops = sorted({top_of(cid, ancestry, ids) for cid, ancestry in doomed})
        rows = await self.sql.rows(_usage_of_trees(tops))
        held: dict[str, tuple[int, int]] = {}
        of_tops = set(tops)
        for cid, ancestry, messages, size in rows.values:
            top = top_of(cid, ancestry, of_tops)
            before = held.get(top, (0, 0))
            held[top] = (before[0] + messages, before[1] + size)
        return held

    async def _delete_messages_in_shares(self, counts: Sequence[tuple[str, int]]) -> None:
        """SQLite: before conversations are deleted, the messages of the long ones among
        `counts` (id, message count), MESSAGES_PER_SHARE per statement (oldest first), the
        rest of the process let in for SHARE_PAUSE between them. The foreign key's cascade
        deleted them in the conversation's own statement, which held the event loop for all
        of them (a long transcript's full-text index entries go one by one): health checks
        and every read waited. The transaction still commits whole: a read meanwhile sees
        the conversations as they were. On PostgreSQL a statement does not hold the event
        loop: the cascade does it all, as it does here for the short ones."""
        if not self.sql.is_sqlite:
            return
        for cid, count in counts:
            if count <= MESSAGES_PER_SHARE:
                continue
            for upto in range(MESSAGES_PER_SHARE, count + MESSAGES_PER_SHARE, MESSAGES_PER_SHARE):
                await self.sql.execute(_MESSAGES_UPTO, {"cid": cid, "upto": upto})
                await asyncio.sleep(SHARE_PAUSE)

    async def _keep_logged_messages(self, doomed: Sequence[tuple[str, str]]) -> None:
        """Before (id, ancestry) conversations and everything below them are deleted: the
        log rows that reference their messages get a copy, where the tree's log outlives
        them (a child transcript's; a root's log goes with it)."""
        for cid, ancestry in doomed:
            if ancestry:
                await event_log.keep_messages(self.sql, root_of(cid, ancestry), cid, subtree=True)

    async def _below(self, cid: str) -> list[str]:
        """The ids of the child transcripts below `cid` (its delete cascades to them)."""
        found = await self.sql.rows(
            select(C.c.id).where((" " + C.c.ancestry + " ").like(f"% {cid} %"))
        )
        return found.scalars()

    async def acquire_lock(
        self, conversation_id: str, *, ttl_seconds: int, token: str | None = None
    ) -> tuple[str, datetime]:
        """The lock of a conversation nobody holds, or that `token` holds (taken again from
        now); LOCKED while another token holds it, CONFLICT (`token`) once `token` has
        released it (until another token takes it)."""
        until = lock_expiry(ttl_seconds, self.repo.now())
        token = token or new_lock_token()
        digest = self.repo.keyring.digest("lock", token)
        await self.repo.versions.set_lock(conversation_id, digest=digest, until=until)
        return token, until

    async def release_lock(self, conversation_id: str, *, token: str) -> bool:
        """Release the lock `token` holds (or held until it ran out, while nobody took it);
        False for a stale token (someone re-took it) or one released already. The row keeps
        the token's digest with no expiry: the lock is unheld, and acquire refuses that token
        (a first attempt carried out after its retry took and released the lock)."""
        cid = ids.parse(conversation_id, what="conversation", field="conversationId")
        where = [C.c.id == cid, self.where(C, scope.Access.WRITE), alive(C)]
        released = await self.sql.execute(
            update(C)
            .where(
                *where,
                C.c.lock_digest == self.repo.keyring.digest("lock", token),
                C.c.locked_until.is_not(None),
            )
            .values(locked_until=None),
            self.params(),
        )
        if released:
            return True
        if not (await self.sql.rows(select(C.c.id).where(*where), self.params())).values:
            raise not_found("conversation", "conversationId")
        return False


# How many messages a long conversation's delete takes per statement on SQLite (see
# Conversations._delete_messages_in_shares): each holds the event loop for tens of
# milliseconds.
MESSAGES_PER_SHARE = 2000
# The pause after each share. Short: the delete holds SQLite's writer throughout, and every
# other write waits for all of it (pausing as long as each share, as the sweep does in the
# background, doubled that wait); a few milliseconds are enough for the loop to answer what
# is ready.
SHARE_PAUSE = 0.002
_MESSAGES_UPTO = Prepared(
    delete(M).where(M.c.conversation_id == bindparam("cid"), M.c.seq <= bindparam("upto"))
)


def _trees(tops: Sequence[str]) -> Select[tuple[str]]:
    """The ids of the conversations `tops` and of every one below them, found down the
    delegations, by their index, where a conversation's ancestry (indexed by nothing) would
    be a scan of them all."""
    tree = select(C.c.id).where(C.c.id.in_(tops)).cte("tree", recursive=True)
    tree = tree.union_all(
        select(D.c.child_conversation_id).where(D.c.parent_conversation_id == tree.c.id)
    )
    return select(tree.c.id)


def _usage_of_trees(tops: Sequence[str]) -> Select[tuple[str, str, int, int]]:
    """Each conversation of the trees under `tops` (`tops` included): its id, its ancestry,
    and what it counts in its workspace's usage (messages, bytes)."""
    return select(C.c.id, C.c.ancestry, *usage_of_row()).where(C.c.id.in_(_trees(tops)))


@functools.cache
def _by_ids(reach: scope.Reach) -> Prepared:
    """Conversations by id within `reach`: every loader batch and every write's payload read."""
    return Prepared(
        select(C).where(
            C.c.id.in_(bindparam("ids", expanding=True)), scope.clause(C, reach), alive(C)
        )
    )


# A JSON number's text (a token id looked up as a number, in a document matched by its text).
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
# The sealed columns of a conversation (their values' keys in a create's and an update's).
_SEALED = ("title", "metadata", "meta")
# How many of the window's conversations a pending lookup with a token id opens at a time
# (with encryption at rest).
_SEALED_CANDIDATES = 50


def _metadata_value_is(meta: str, key: str, value: str) -> bool:
    """A top-level metadata value equals `value` as text (a number too), as
    Conversations._metadata_equals matches it in SQL."""
    if "\x00" in value:
        return False
    document = jsoncodec.loads(meta)
    if not isinstance(document, dict) or key not in document:
        return False
    found = document[key]
    if isinstance(found, str):
        return found == value
    if isinstance(found, int | float) and not isinstance(found, bool):
        return jsoncodec.dumps(found).decode() == value
    return False


def _matched_by_text(meta: str, key: str, value: str) -> bool:
    """Whether a document that `Conversations._metadata_equals` matched holds `key`:
    `value` at its top level: one holding \\u0000 on PostgreSQL was matched by its text,
    which may be a nested object's (the lookup then reads on); any other, exactly."""
    if "\\u0000" not in meta:
        return True
    return _metadata_value_is(meta, key, value)


def _equals(column: ColumnElement[str], value: str) -> ColumnElement[bool]:
    # Stored strings never hold NUL (check_text refuses it) and PostgreSQL cannot bind one.
    return column == value if "\x00" not in value else false()
