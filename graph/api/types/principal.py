"""The caller (`viewer`), its workspace, and the errors a mutation reports."""

from __future__ import annotations

import strawberry

from graph.api.types.enums import ErrorCode, OwnerType, Scope
from graph.domain import principal as domain


@strawberry.type(
    description="A workspace scope: `type` matches ^[a-z][a-z0-9_-]*$, `id` is "
    "non-empty; key is `type:id`."
)
class Workspace:
    type: str
    id: str

    @strawberry.field
    def key(self) -> str:
        return f"{self.type}:{self.id}"


@strawberry.type(
    description="The authenticated caller, derived from the request's credentials only."
)
class Principal:
    workspace: Workspace
    owner_type: OwnerType
    owner_key: str
    scopes: list[Scope]

    @classmethod
    def of(cls, p: domain.Principal) -> Principal:
        return cls(
            workspace=Workspace(type=p.workspace_type, id=p.workspace_id),
            owner_type=p.owner_type,
            owner_key=p.owner_key,
            scopes=list(p.scopes),
        )


@strawberry.type
class UserError:
    code: ErrorCode
    message: str
    field: list[str] | None = strawberry.field(
        default=None,
        description='Path to the offending input field, e.g. ["messages", "3"].',
    )
