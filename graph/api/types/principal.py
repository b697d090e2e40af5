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
    acting_service: str | None = strawberry.field(
        default=None,
        description="When a SERVICE token acts for an owner (`Convograph-Owner`), the token's "
        "own owner as `type:key`; null otherwise. The principal is then that owner with READ "
        "and WRITE.",
    )

    @classmethod
    def of(cls, p: domain.Principal) -> Principal:
        return cls(
            workspace=Workspace(type=p.workspace_type, id=p.workspace_id),
            owner_type=p.owner_type,
            owner_key=p.owner_key,
            scopes=list(p.scopes),
            acting_service=p.acting_service,
        )


@strawberry.type
class UserError:
    code: ErrorCode
    message: str
    field: list[str] | None = strawberry.field(
        default=None,
        description='Path to the offending input field, e.g. ["messages", "3"].',
    )
