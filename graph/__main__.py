"""The convograph command: serve, migrate, sweep, token create|list|revoke|rotate,
keys generate|status|rotate|encrypt-existing, export-schema."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from graph.domain.messages import is_utf8
from graph.domain.principal import SYSTEM, Scope, parse_owner, parse_workspace
from graph.settings import Settings, SettingsError, misspelled
from graph.store.encryption import EncryptionError
from graph.store.keyring import MissingSecret
from graph.store.repository import Repository

T = TypeVar("T")

if TYPE_CHECKING:
    from graph.store.db import Database
    from graph.store.repository.tokens import Rotation, TokenInfo

BOOTSTRAP_WORKSPACE = ("default", "default")
BOOTSTRAP_OWNER = "system:admin"
# How a command's error names the database, when it is the database that failed (exit 1).
DATABASE = "the database of CONVOGRAPH_DATABASE_URL"

DURATION = re.compile(r"([0-9]{1,9})([dhms])")
UNIT_SECONDS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
# Far enough for any token, near enough that now + it is a datetime on every backend.
LONGEST_LIFETIME = timedelta(days=100 * 366)


def duration(text: str) -> timedelta:
    """`30d`, `12h`, `15m`, `45s` as a timedelta (argparse `type`: an error names the flag)."""
    found = DURATION.fullmatch(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: a whole number above 0 and a unit, d, h, m or s "
            "(e.g. 30d, 12h)"
        )
    value = timedelta(seconds=int(found[1]) * UNIT_SECONDS[found[2]])
    if not timedelta(0) < value <= LONGEST_LIFETIME:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0s and at most 36600d")
    return value


def _durations_joined(given: list[str]) -> list[str]:
    """`--expires-in -1d` as `--expires-in=-1d`: argparse takes a value that starts with a
    dash and a digit but is no number for a flag of its own, and said only "expected one
    argument"; joined to its flag, it reaches `duration`, which says what a duration is.
    The flag as argparse also takes it, abbreviated (`--expires -1d`), the same."""
    joined: list[str] = []
    for arg in given:
        flag = joined[-1] if joined else ""
        if len(flag) > 2 and "--expires-in".startswith(flag) and re.match(r"-[0-9.]", arg):
            joined[-1] = f"{flag}={arg}"
        else:
            joined.append(arg)
    return joined


def _settings(
    args: argparse.Namespace, *, creates: bool = False, serving: bool = False
) -> Settings:
    """The settings of the environment and the flags. Only a command that `creates` the
    database (migrate, serve) may be given a SQLite file that does not exist: any other
    would create it, empty, and a directory and a secret beside it, for a mistyped path.
    When `serving`, the log is set up from them before anything is said in it: a warning
    said before went out in Python's default format, in a JSON log a line no shipper reads."""
    misspelt = list(misspelled(os.environ))

    def warn() -> None:
        for variable, meant in misspelt:
            logging.getLogger("convograph").warning(
                "%s is not a setting and is ignored: did you mean %s?", variable, meant
            )

    try:
        settings = Settings.from_env(
            database_url=getattr(args, "database_url", None),
            host=getattr(args, "host", None),
            port=getattr(args, "port", None),
            migrate_on_start=False if getattr(args, "no_migrate", False) else None,
        )
    except SettingsError:
        warn()  # a misspelt variable may be why a setting is missing
        raise
    if serving:
        from graph.server.logs import configure_logging

        configure_logging(settings)
    warn()
    path = settings.sqlite_path
    if not creates and path is not None and not path.exists():
        raise SettingsError(
            f"CONVOGRAPH_DATABASE_URL: there is no SQLite database at {path} "
            "(`convograph migrate` creates one)"
        )
    return settings


def _as_system(
    settings: Settings, work: Callable[[Repository], Awaitable[T]], *, write: bool = True
) -> T:
    """Run `work` in one unit of work of the process itself (SYSTEM). A write to a SQLite
    database that cannot be written is refused before anything runs, naming the file or
    directory (SQLite says only "attempt to write a readonly database", at the first write)."""
    from graph.services import build_services
    from graph.store.migration_state import require_migrated

    if write:
        _writable(settings)

    async def run() -> T:
        services = build_services(settings)
        try:
            await services.check_encryption(serving=False)
            await require_migrated(services.db)
            uow = services.uow
            async with uow.write(SYSTEM) if write else uow.read(SYSTEM) as repo:
                return await work(repo)
        finally:
            await services.db.dispose()

    return asyncio.run(run())


def _writable(settings: Settings) -> None:
    """Unwritable (said in one line by `main`, exit 1) when the SQLite database cannot be
    written, found before a command that writes starts: SQLite opens a read-only file for
    reading and says only "attempt to write a readonly database" at the first write, or
    "unable to open database file" in a read-only directory. The same of the encryption's
    key store (an EncryptionError naming its setting, exit 2): a server on a read-only one
    started, then failed every write that needed a new key."""
    from graph.store.db import sqlite_file_read_only, sqlite_read_only
    from graph.store.errors import Unwritable
    from graph.store.key_store import unusable

    if (reason := sqlite_read_only(settings)) is not None:
        raise Unwritable(reason)
    if settings.is_sqlite and settings.encryption_on:
        keys = settings.resolved_key_store_file
        if (reason := sqlite_file_read_only(keys)) is not None:
            raise unusable(keys, reason)


def cmd_migrate(args: argparse.Namespace) -> int:
    from graph.store.migrate import DowngradeRefused, upgrade_blocking

    if args.downgrade_to is not None:
        revision = args.downgrade_to.strip()
        if not revision or revision in ("head", "heads"):
            print(
                "error: --downgrade-to names a revision below the database's (e.g. 0016)",
                file=sys.stderr,
            )
            return 2
        from alembic.util import CommandError

        settings = _settings(args)
        _writable(settings)
        try:
            # The script's own id: `0016@head` names the head (0018), where it stops.
            target = upgrade_blocking(settings, downgrade_to=revision)
        except CommandError as exc:  # an unknown revision, or one above the database's
            print(f"error: cannot downgrade to {revision!r}: {exc}", file=sys.stderr)
            return 2
        except DowngradeRefused as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"database is at revision {target}")
        return 0
    settings = _settings(args, creates=True)
    _writable(settings)
    upgrade_blocking(settings)
    print("database is at the newest revision")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from graph.services import build_services
    from graph.store.migration_state import require_migrated
    from graph.store.retention import sweep

    settings = _settings(args)
    _writable(settings)

    async def run() -> int:
        # On PostgreSQL the deletions reach the servers' subscribers through NOTIFY.
        services = build_services(settings)
        try:
            # Expiry destroys the expired conversations' data keys: without the master key
            # (an encrypted database) it would delete their rows and leave their keys.
            await services.check_encryption(serving=False)
            await require_migrated(services.db)
            return await sweep(services.uow)
        finally:
            await services.db.dispose()

    removed = asyncio.run(run())
    print(f"removed {removed} expired conversations")
    return 0


def _control_character(args: argparse.Namespace, flags: Sequence[str]) -> str | None:
    """The first of `flags` whose value holds a control character (a tab, a line break, an
    escape): `token list` prints one token per line, its fields apart by tabs."""
    for flag in flags:
        value = getattr(args, flag.removeprefix("--").replace("-", "_"))
        if value is not None and any(unicodedata.category(c) == "Cc" for c in value):
            return flag
    return None


def cmd_token_create(args: argparse.Namespace) -> int:
    if (flag := _control_character(args, ("--workspace", "--owner", "--label"))) is not None:
        print(
            f"error: argument {flag}: holds a control character (a tab, a line break, …), "
            "which `token list` could not show",
            file=sys.stderr,
        )
        return 2
    try:
        workspace = parse_workspace(args.workspace)
        owner = parse_owner(args.owner)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    async def work(repo: Repository) -> tuple[str, str]:
        return await repo.tokens.create(
            workspace=workspace,
            owner=owner,
            scope_=Scope(args.scope.upper()),
            label=args.label,
            expires_in=args.expires_in,
        )

    token_id, token = _as_system(_settings(args), work)
    expiry = (
        f", expires {(datetime.now(UTC) + args.expires_in).isoformat(timespec='seconds')}"
        if args.expires_in
        else ""
    )
    print(
        f"created token {token_id} for {workspace[0]}:{workspace[1]} "
        f"({owner[0].value.lower()}, scope {args.scope.lower()}{expiry})",
        file=sys.stderr,
    )
    print(token)
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    async def work(repo: Repository) -> list[TokenInfo]:
        return await repo.tokens.all()

    now = datetime.now(UTC)
    for t in _as_system(_settings(args), work, write=False):
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
                    t.expires_at.isoformat() if t.expires_at else "-",
                    t.state(now),
                ]
            )
        )
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    async def work(repo: Repository) -> bool:
        return await repo.tokens.revoke(args.id)

    if _as_system(_settings(args), work):
        print(f"revoked token {args.id}")
        return 0
    # Exit 2 as for every ID, revision or path the command was given that names nothing
    # it can act on (`token rotate` among them); 1 is the database's failure.
    print(
        f"error: no token with id {args.id} to revoke (unknown, or revoked already)",
        file=sys.stderr,
    )
    return 2


def cmd_token_rotate(args: argparse.Namespace) -> int:
    from graph.store.repository.tokens import RotatedAlready

    settings = _settings(args)
    grace = timedelta(seconds=settings.token_rotation_grace_seconds)

    async def work(repo: Repository) -> Rotation | RotatedAlready | None:
        return await repo.tokens.rotate(args.id, grace=grace, expires_in=args.expires_in)

    rotated = _as_system(settings, work)
    if rotated is None:
        print(
            f"error: no live token with id {args.id} (unknown, revoked or expired)", file=sys.stderr
        )
        return 2
    if isinstance(rotated, RotatedAlready):
        then = f"error: token {args.id} was rotated already, into token {rotated.successor_id}"
        if rotated.successor_live:
            print(
                f"{then}: rotate that one (`token revoke {args.id}` ends this one now)",
                file=sys.stderr,
            )
        else:
            # Its successor gone (a leaked one revoked): a new token is the way, not a
            # rotation of one whose life was cut to the grace.
            print(
                f"{then}, which is revoked or expired: `token create` a new one "
                f"(`token revoke {args.id}` ends this one now)",
                file=sys.stderr,
            )
        return 2
    ends = (
        "was revoked"
        if not grace
        else f"works until {rotated.old_ends_at.isoformat(timespec='seconds')}"
    )
    expiry = (
        f", expires {rotated.expires_at.isoformat(timespec='seconds')}"
        if rotated.expires_at
        else ""
    )
    print(
        f"rotated token {args.id}: new token {rotated.id}{expiry}; the old one {ends}",
        file=sys.stderr,
    )
    print(rotated.token)
    return 0


def cmd_keys_generate(args: argparse.Namespace) -> int:
    from graph.store.encryption import generate_key

    print(generate_key())
    return 0


def _with_encryption(
    args: argparse.Namespace, work: Callable[[Database], Awaitable[T]], *, write: bool = False
) -> T:
    """Run `work` on the database of the settings, with encryption on (a master key set).
    Sealed content whose key store is not where the settings say is refused first, as every
    other command refuses it: a new, empty store was made there, and `keys status` said "no
    data keys yet", `keys rotate` that every data key was wrapped by the new master key. A
    command that `write`s is refused a read-only database or key store first, naming it
    (`keys rotate` on a read-only key store blamed "the database of CONVOGRAPH_DATABASE_URL")."""
    from graph.store.db import Database
    from graph.store.encryption import check_key_store_found
    from graph.store.migration_state import require_migrated

    settings = _settings(args)
    if not settings.encryption_on:
        raise EncryptionError(
            "CONVOGRAPH_ENCRYPTION_KEY (or CONVOGRAPH_ENCRYPTION_KEY_FILE) is not set"
        )
    if write:
        _writable(settings)

    async def run() -> T:
        db = Database(settings)
        try:
            assert db.encryption is not None
            await check_key_store_found(db.encryption, engine=db.reader)
            await require_migrated(db)
            return await work(db)
        finally:
            await db.dispose()

    return asyncio.run(run())


def cmd_keys_status(args: argparse.Namespace) -> int:
    from graph.store import encryption_admin
    from graph.store.key_store import TOMBSTONE

    async def work(db: Database) -> tuple[list[encryption_admin.KeyCount], str | None]:
        assert db.encryption is not None
        counts = await encryption_admin.status(db.encryption)
        return counts, await encryption_admin.retired_to(db.encryption)

    counts, successor = _with_encryption(args, work)
    if successor is not None:
        print(
            f"the current master key is retired: `keys rotate` wrapped the data keys under "
            f"master key {successor} instead"
        )
    if not counts:
        print("no data keys yet")
    for count in counts:
        if count.key_id == TOMBSTONE:
            print(f"deleted conversations: {count.count} data keys destroyed")
        else:
            print(f"master key {count.key_id}: wraps {count.count} data keys, {count.which}")
    return 0


def cmd_keys_rotate(args: argparse.Namespace) -> int:
    from graph.store import encryption_admin

    async def work(db: Database) -> int:
        assert db.encryption is not None
        return await encryption_admin.rotate(db.encryption)

    done = _with_encryption(args, work, write=True)
    print(
        f"wrapped {done} data keys under the current master key; every data key is now "
        "wrapped by it (CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY, or its _FILE, may be removed)"
    )
    return 0


def cmd_keys_encrypt_existing(args: argparse.Namespace) -> int:
    from graph.store import encryption_admin

    def progress(what: str, count: int) -> None:
        # "messages: sealed 3"; what is dropped, not sealed, says so in its name.
        print(f"{what}: {count}" if what.endswith(")") else f"{what}: sealed {count}")

    async def work(db: Database) -> int:
        return await encryption_admin.encrypt_existing(db, progress=progress)

    total = _with_encryption(args, work, write=True)
    settings = _settings(args)
    if settings.is_sqlite:
        encryption_admin.vacuum(settings)
        print(f"sealed {total} rows; the database file was rewritten (VACUUM)")
    else:
        print(
            f"sealed {total} rows; the old row versions stay in the table files until "
            "PostgreSQL reclaims them: run VACUUM FULL to have them overwritten"
        )
    return 0


def cmd_export_schema(args: argparse.Namespace) -> int:
    from graph.api.schema import export_sdl

    sys.stdout.write(export_sdl())
    return 0


def bootstrap_token(settings: Settings) -> str | None:
    """On a database without tokens, create the first ADMIN token (returned once).

    On one with tokens, say so when every live one was made under another server secret
    than this one (a secret file lost and made anew, another CONVOGRAPH_SECRET): the server
    would answer each of them 401, and nothing else would say why."""

    async def work(repo: Repository) -> tuple[str | None, int]:
        token = await repo.tokens.create_first(
            workspace=BOOTSTRAP_WORKSPACE,
            owner=parse_owner(BOOTSTRAP_OWNER),
            scope_=Scope.ADMIN,
            label="bootstrap",
        )
        if token is None:
            return None, await repo.tokens.live_under_another_secret()
        return token, 0

    token, foreign = _as_system(settings, work)
    if foreign:
        where = "CONVOGRAPH_SECRET" if settings.secret else str(settings.resolved_secret_file)
        logging.getLogger("convograph").error(
            "none of the %d live API tokens can be accepted: they were made under another "
            "server secret than %s holds. Start with the secret that made them or, if it is "
            "lost, make a new token (convograph token create) and revoke the old ones "
            "(convograph token list, token revoke)",
            foreign,
            where,
        )
    return token


def bootstrap_notice(token: str, settings: Settings) -> str:
    """What `serve` prints with the bootstrap token: the token, and where to use it. With
    port 0 the system picks the port once uvicorn listens, after this is printed."""
    where = (
        f"http://{settings.host}:{settings.port}/graphql"
        if settings.port
        else "/graphql at the address uvicorn says it is running on (port 0: the system's pick)"
    )
    return (
        "\nNo API token existed, so an ADMIN token was created for workspace "
        "default:default, owner system:admin. It is shown only this once:\n\n"
        f"    {token}\n\nOpen {where} and put it in the Authorization header.\n"
    )


def _bootstrap_when_ready(settings: Settings) -> str | None:
    """`bootstrap_token`, unless the database cannot take it yet (not migrated, or away): a
    replica started before the migration, or while its database is down, still starts, out
    of rotation (/readyz says why) until the database is ready."""
    from graph.store.errors import database_problem

    try:
        return bootstrap_token(settings)
    except Exception as exc:
        reason = database_problem(exc)
        if reason is None:
            raise
        logging.getLogger("convograph").warning(
            "no bootstrap token checked or made: the database is not ready (%s)", reason
        )
        return None


def _cannot_listen(settings: Settings, args: argparse.Namespace) -> str | None:
    """Why the server could not listen on its host and port (taken, or no such address),
    found before anything is migrated or stored: uvicorn finds out only once the app has
    started (a bootstrap token made and printed), and says so in a few log lines, exit 3.
    The sockets are bound as asyncio's server binds them, then closed."""
    import socket

    host, port = settings.host, settings.port
    named = "/".join(
        f"--{flag}" if getattr(args, flag, None) is not None else f"CONVOGRAPH_{flag.upper()}"
        for flag in ("host", "port")
    )
    bound: list[socket.socket] = []
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        return f"{named}: cannot listen on {host}:{port}: {exc.strerror or exc}"
    finally:
        for sock in bound:
            sock.close()
    return None


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from graph.app import create_app
    from graph.server import heap
    from graph.server.header_timeout import with_header_deadline
    from graph.server.shutdown import serve
    from graph.server.sockets import OpenSockets
    from graph.store.migrate import upgrade_blocking

    settings = _settings(args, creates=True, serving=True)
    if (reason := _cannot_listen(settings, args)) is not None:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    _writable(settings)
    if settings.migrate_on_start:
        upgrade_blocking(settings)
    token = _bootstrap_when_ready(settings)
    if token is not None:
        print(bootstrap_notice(token, settings), flush=True)
    sockets = OpenSockets()
    app = create_app(settings, sockets=sockets)
    heap.settle()
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        workers=1,
        # uvicorn's own lines go through our handlers (JSON or text, like every other line).
        log_config=None,
        http=with_header_deadline(settings.header_timeout_seconds),
        # Typed int, but uvicorn only hands it to loop.call_later, which takes a float.
        timeout_keep_alive=settings.keep_alive_seconds,  # type: ignore[arg-type]
        # Past this many open connections, new ones get 503 instead of piling up. uvicorn
        # counts the connection asking among the open ones: N + 1 serves N at once.
        limit_concurrency=settings.max_connections + 1,
        ws=websockets_implementation(compression=settings.ws_compression),
        ws_per_message_deflate=settings.ws_compression,
        # A WebSocket message carries one subscribe (a query and a few ids), not 16 MiB:
        # comments are lexed but not counted as tokens, so their length is what bounds them.
        ws_max_size=4 * settings.max_query_chars,
        # SIGTERM or Ctrl-C: requests in flight get this long to finish (shutdown.py).
        # Typed int, but uvicorn only hands it to asyncio.wait_for, which takes a float.
        timeout_graceful_shutdown=settings.shutdown_timeout_seconds,  # type: ignore[arg-type]
    )
    return serve(config, before_drain=sockets.close_all)


def websockets_implementation(*, compression: bool) -> str:
    """uvicorn's WebSocket implementation for `serve` (its package a declared dependency).

    wsproto holds less for every open WebSocket, idle or subscribed, than websockets' sans-I/O
    one; but its permessage-deflate takes zlib's largest window, where websockets' takes a
    smaller one, so with compression on websockets' holds less (bench.subscribers measures
    both ways).
    """
    return "websockets-sansio" if compression else "wsproto"


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
    migrate = with_db(sub.add_parser("migrate", help="upgrade the database to the newest revision"))
    migrate.add_argument(
        "--downgrade-to",
        metavar="REVISION",
        help="downgrade to this revision instead (e.g. 0016), to run an older release",
    )
    migrate.set_defaults(func=cmd_migrate)
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
    create.add_argument(
        "--scope",
        default="write",
        choices=["read", "write", "admin", "service"],
        help="default: write",
    )
    create.add_argument("--label")
    create.add_argument(
        "--expires-in",
        type=duration,
        metavar="DURATION",
        help="refused once this long has passed: 30d, 12h, 15m, 45s (default: never)",
    )
    create.set_defaults(func=cmd_token_create)
    with_db(tsub.add_parser("list", help="list tokens (never the token itself)")).set_defaults(
        func=cmd_token_list
    )
    revoke = with_db(tsub.add_parser("revoke", help="revoke a token by id"))
    revoke.add_argument("id")
    revoke.set_defaults(func=cmd_token_revoke)
    rotate = with_db(
        tsub.add_parser(
            "rotate",
            help="issue a token like ID (printed once) and end ID after "
            "CONVOGRAPH_TOKEN_ROTATION_GRACE_SECONDS",
        )
    )
    rotate.add_argument("id")
    rotate.add_argument(
        "--expires-in",
        type=duration,
        metavar="DURATION",
        help="the new token's lifetime (default: the old token's, or never)",
    )
    rotate.set_defaults(func=cmd_token_rotate)

    keys = sub.add_parser("keys", help="encryption at rest: master and data keys")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    ksub.add_parser(
        "generate", help="print a new master key (for CONVOGRAPH_ENCRYPTION_KEY)"
    ).set_defaults(func=cmd_keys_generate)
    with_db(ksub.add_parser("status", help="which master key wraps how many data keys"))
    ksub.choices["status"].set_defaults(func=cmd_keys_status)
    with_db(
        ksub.add_parser(
            "rotate",
            help="wrap every data key under CONVOGRAPH_ENCRYPTION_KEY, unwrapping with "
            "CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY (online, resumable)",
        )
    ).set_defaults(func=cmd_keys_rotate)
    with_db(
        ksub.add_parser(
            "encrypt-existing",
            help="seal the content written while encryption was off, in place (resumable)",
        )
    ).set_defaults(func=cmd_keys_encrypt_existing)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING)
    given = _durations_joined(list(sys.argv[1:] if argv is None else argv))
    args = parser().parse_args(given)
    for name, value in vars(args).items():
        # Bytes that are not UTF-8 arrive as lone surrogates (PEP 383): no token, label or
        # path stored from them could be read back.
        if isinstance(value, str) and not is_utf8(value):
            flag = "--" + name.replace("_", "-")
            named = flag if any(a.split("=")[0] == flag for a in given) else name.upper()
            print(f"error: argument {named}: not valid UTF-8 text", file=sys.stderr)
            return 2
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        # What a command had not committed is rolled back with its transaction; `keys
        # encrypt-existing` goes on where it stopped when run again. A connection cut
        # short leaves futures that asyncio reports as it collects them, on the way out.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        print("interrupted: what was not committed was rolled back", file=sys.stderr)
        return 130
    except (MissingSecret, SettingsError, EncryptionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from graph.store.errors import database_problem

        reason = database_problem(exc)
        if reason is None:
            raise
        print(f"error: {DATABASE}: {reason}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
