"""The convograph command: serve, migrate, sweep, token create|list|revoke, export-schema."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from .crypto import Keyring, MissingSecret, load_secret
from .db import Database
from .principal import Scope, parse_owner, parse_workspace
from .settings import Settings

T = TypeVar("T")

BOOTSTRAP_WORKSPACE = ("default", "default")
BOOTSTRAP_OWNER = "system:admin"


def _settings(args: argparse.Namespace) -> Settings:
    return Settings.from_env(
        database_url=getattr(args, "database_url", None),
        host=getattr(args, "host", None),
        port=getattr(args, "port", None),
        migrate_on_start=False if getattr(args, "no_migrate", False) else None,
    )


async def _with_db(settings: Settings, work: Callable[[Database, Keyring], Awaitable[T]]) -> T:
    db = Database(settings)
    try:
        return await work(db, Keyring(load_secret(settings)))
    finally:
        await db.dispose()


def cmd_migrate(args: argparse.Namespace) -> int:
    from .migrate import upgrade_blocking

    upgrade_blocking(_settings(args))
    print("database is at the newest revision")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from .app import broker_for
    from .retention import sweep

    async def work(db: Database, keyring: Keyring) -> int:
        # On PostgreSQL the deletions reach the servers' subscribers through NOTIFY.
        return await sweep(db, broker=broker_for(db))

    removed = asyncio.run(_with_db(_settings(args), work))
    print(f"removed {removed} expired conversations")
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    from .tokens import create_token

    try:
        workspace = parse_workspace(args.workspace)
        owner = parse_owner(args.owner)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    async def work(db: Database, keyring: Keyring) -> tuple[str, str]:
        async with db.write() as conn:
            return await create_token(
                conn,
                keyring=keyring,
                workspace=workspace,
                owner=owner,
                scope=Scope(args.scope.upper()),
                label=args.label,
            )

    token_id, token = asyncio.run(_with_db(_settings(args), work))
    print(
        f"created token {token_id} for {workspace[0]}:{workspace[1]} "
        f"({owner[0].value.lower()}, scope {args.scope.lower()})",
        file=sys.stderr,
    )
    print(token)
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    from .tokens import TokenInfo, list_tokens

    async def work(db: Database, keyring: Keyring) -> list[TokenInfo]:
        async with db.read() as conn:
            return await list_tokens(conn, keyring=keyring)

    for t in asyncio.run(_with_db(_settings(args), work)):
        print(
            "\t".join(
                [
                    t.id,
                    t.workspace_key,
                    t.owner,
                    ",".join(s.value.lower() for s in t.scopes),
                    t.label or "-",
                    t.created_at.isoformat(),
                    t.revoked_at.isoformat() if t.revoked_at else "-",
                ]
            )
        )
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    from .tokens import revoke_token

    async def work(db: Database, keyring: Keyring) -> bool:
        async with db.write() as conn:
            return await revoke_token(conn, token_id=args.id)

    if asyncio.run(_with_db(_settings(args), work)):
        print(f"revoked token {args.id}")
        return 0
    print(f"error: no live token with id {args.id}", file=sys.stderr)
    return 1


def cmd_export_schema(args: argparse.Namespace) -> int:
    from .schema import export_sdl

    sys.stdout.write(export_sdl())
    return 0


async def bootstrap_token(settings: Settings) -> str | None:
    """On a database without tokens, create the first ADMIN token (returned once)."""
    from .tokens import create_token, has_tokens

    async def work(db: Database, keyring: Keyring) -> str | None:
        async with db.write() as conn:
            if await has_tokens(conn):
                return None
            owner = parse_owner(BOOTSTRAP_OWNER)
            _, token = await create_token(
                conn,
                keyring=keyring,
                workspace=BOOTSTRAP_WORKSPACE,
                owner=owner,
                scope=Scope.ADMIN,
                label="bootstrap",
            )
            return token

    return await _with_db(settings, work)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .app import create_app
    from .header_timeout import with_header_deadline
    from .logs import configure_logging
    from .migrate import upgrade_blocking

    settings = _settings(args)
    configure_logging(settings)
    if settings.migrate_on_start:
        upgrade_blocking(settings)
    token = asyncio.run(bootstrap_token(settings))
    if token is not None:
        print(
            "\nNo API token existed, so an ADMIN token was created for workspace "
            "default:default, owner system:admin. It is shown only this once:\n\n"
            f"    {token}\n\nOpen http://{settings.host}:{settings.port}/graphql and put it in "
            "the Authorization header.\n",
            flush=True,
        )
    app = create_app(settings)
    # What exists now (modules, the schema, SQLAlchemy's metadata) lives as long as the
    # process: frozen, full collections stop walking it. They cost 60-100 ms pauses inside
    # large requests (bench replace: every other save 96-146 ms instead of 35-50 ms).
    gc.collect()
    gc.freeze()
    # A request carrying 5,000 messages allocates some 100,000 containers: with Python's
    # default threshold of 700 that is 150 young collections per request (bench replace:
    # the 5,000+1 save 31.7-32.8 -> 29.5-30.1 ms at 20,000).
    gc.set_threshold(20_000, 10, 10)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        workers=1,
        # uvicorn's own lines go through our handlers (JSON or text, like every other line).
        log_config=None,
        http=with_header_deadline(settings.header_timeout_seconds),
        # Past this many open connections, new ones get 503 instead of piling up.
        limit_concurrency=settings.max_connections,
        # A WebSocket message carries one subscribe (a query and a few ids), not 16 MiB:
        # comments are lexed but not counted as tokens, so their length is what bounds them.
        ws_max_size=4 * settings.max_query_chars,
    )
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="convograph", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    def with_db(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
        sp.add_argument("--database-url", help="overrides CONVOGRAPH_DATABASE_URL")
        return sp

    serve = with_db(sub.add_parser("serve", help="run the server"))
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--no-migrate", action="store_true", help="do not upgrade on start")
    serve.set_defaults(func=cmd_serve)
    with_db(
        sub.add_parser("migrate", help="upgrade the database to the newest revision")
    ).set_defaults(func=cmd_migrate)
    with_db(sub.add_parser("sweep", help="delete expired conversations now")).set_defaults(
        func=cmd_sweep
    )
    sub.add_parser("export-schema", help="print the GraphQL SDL").set_defaults(
        func=cmd_export_schema
    )

    token = sub.add_parser("token", help="manage API tokens")
    tsub = token.add_subparsers(dest="token_command", required=True)
    create = with_db(tsub.add_parser("create", help="issue a token (printed once)"))
    create.add_argument("--workspace", required=True, help="TYPE:ID, e.g. site:42")
    create.add_argument("--owner", required=True, help="TYPE:KEY, e.g. user:alice")
    create.add_argument("--scope", default="write", choices=["read", "write", "admin"])
    create.add_argument("--label")
    create.set_defaults(func=cmd_token_create)
    with_db(tsub.add_parser("list", help="list tokens (never the token itself)")).set_defaults(
        func=cmd_token_list
    )
    revoke = with_db(tsub.add_parser("revoke", help="revoke a token by id"))
    revoke.add_argument("id")
    revoke.set_defaults(func=cmd_token_revoke)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except MissingSecret as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
