"""Workspace figures: what a dashboard (and the inspector's header) shows at a glance."""

from __future__ import annotations

import strawberry

from graph.api.scalars import BigInt
from graph.api.types.enums import DelegationStatus
from graph.store.repository.figures import Figures


@strawberry.type(description="How many delegations have one status.")
class DelegationStatusCount:
    status: DelegationStatus
    count: int


@strawberry.type(
    description="Counts over the records the caller may read: an ADMIN or SERVICE token's "
    "whole workspace, any other token's own records. Expired conversations (and what is "
    "below them) are not counted."
)
class WorkspaceFigures:
    conversations: int = strawberry.field(
        description="Conversations, delegations' child transcripts included."
    )
    messages: int = strawberry.field(description="Messages of their live transcripts.")
    token_count: BigInt = strawberry.field(
        description="The sum of `token_count` over those messages, where a message carries "
        "one (a whole number from 0 to 2^31 - 1 at its top level)."
    )
    stored_bytes: BigInt = strawberry.field(
        description="The UTF-8 bytes of those messages' JSON and of their conversations' "
        "compaction snapshots' JSON: what a workspace byte quota counts (which also counts "
        "expired conversations until the sweep deletes them)."
    )
    delegations: list[DelegationStatusCount] = strawberry.field(
        description="Delegations by status: every status, in the order of DelegationStatus, "
        "0 where none has it."
    )

    @classmethod
    def of(cls, figures: Figures) -> WorkspaceFigures:
        return cls(
            conversations=figures.conversations,
            messages=figures.messages,
            token_count=BigInt(figures.token_count),
            stored_bytes=BigInt(figures.stored_bytes),
            delegations=[
                DelegationStatusCount(status=status, count=count)
                for status, count in figures.delegations
            ],
        )
