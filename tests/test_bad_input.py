"""Bad input, generated: message documents and every argument and input field of the schema.

Hypothesis draws values for every argument of every query and mutation in schema.graphql
(valid ones, unicode edge cases, NUL, lone surrogates, huge and deeply nested JSON, numbers
beyond 64 bits, empty and blank strings, wrong types), sent as variables or as literals in the
query text. Whatever it sends, the answer is a userErrors entry, a GraphQL error, a 4xx, or
success, never a 5xx or a masked internal error, and no response shows a stack trace or SQL.
A rejected write leaves every stored record as it was (read back through the API), and an
accepted one stores exactly what was sent.

schemathesis drives the same schema against a running server in test_fuzz_graphql.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import graphql
import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph.domain import jsoncodec
from graph.settings import Settings
from tests.conftest import GraphQLClient
from tests.operations import APPEND, COUNT, READ, create
from tests.test_http import serving
from tests.test_isolation import Records, holdings, seed

SCHEMA_SDL = Path(__file__).resolve().parent.parent / "schema.graphql"
MAX_MESSAGE_BYTES = 4096
MAX_MESSAGES = 8

EXAMPLES = 50
SLOW_EXAMPLES = 1000


def hypothesis_settings(examples: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,  # no .hypothesis/ directory in the work tree
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


@cache
def schema() -> graphql.GraphQLSchema:
    return graphql.build_schema(SCHEMA_SDL.read_text())


# -- values ----------------------------------------------------------------------------------

EDGE_STRINGS = [
    "",
    " ",
    " \t\n\r ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\ufeff",
    "\u202eevil",
    "\u200b",
    "e\u0301",
    "🦊" * 3,
    "'; DROP TABLE conversation; --",
    "%_\\",
    '"',
    "\\u0000",
    "null",
    "x" * 10_001,  # one over the longest plain text field
    "ü" * 6_000,
]
STRINGS = st.one_of(
    st.sampled_from(EDGE_STRINGS),
    st.text(max_size=30),
    st.text(st.characters(codec="utf-8"), max_size=12),
    st.sampled_from([chr(c) for c in (0xD800, 0xDBFF, 0xDC00, 0xDFFF)]).map(lambda s: f"a{s}b"),
)
BIG_INTS = st.sampled_from([2**31, -(2**31) - 1, 2**63, 2**64 + 1, -(2**70), 10**30])
INTS = st.one_of(
    st.sampled_from([0, -1, 1, 2**31 - 1, -(2**31), 7]), st.integers(-1000, 1000), BIG_INTS
)
FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([-0.0, 5e-324, 1e308])
DATES = st.sampled_from(
    [
        "",
        "not a date",
        "2024-13-01T00:00:00Z",
        "2024-02-30T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z",
        "2999-01-01T00:00:00+14:00",
        "2000-01-01",
        "2999-01-01T00:00:00.999999999Z",
        "2999-01-01T00:00:00",
    ]
)
WRONG_TYPE = st.sampled_from([1, 1.5, True, "s", [], {}, [1, "a"], {"a": 1}])


def nested(depth: int, leaf: Any) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


JSON_LEAVES = st.one_of(st.none(), st.booleans(), INTS, FLOATS, STRINGS)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(STRINGS, inner, max_size=4),
    max_leaves=12,
)
DEEP = st.one_of(
    st.integers(50, 120).map(lambda d: nested(d, 1)),  # fine
    st.integers(300, 400).map(lambda d: nested(d, "x")),  # beyond what is stored
    st.integers(300, 400).map(lambda d: nested(d, 10**30)),  # and with a huge number
    st.integers(1100, 1400).map(lambda d: nested(d, 1)),  # beyond what a body may hold
    st.integers(1100, 1400).map(lambda d: nested(d, 10**30)),
)
ROLES = st.one_of(st.sampled_from(["user", "assistant", "system", "tool"]), STRINGS, WRONG_TYPE)


@st.composite
def message_documents(draw: st.DrawFn) -> Any:
    """Mostly message-shaped objects; sometimes any JSON value at all."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(JSON_VALUES)
    doc: dict[str, Any] = {}
    if kind != 1:
        doc["role"] = draw(ROLES)
    doc["content"] = draw(
        st.one_of(STRINGS, JSON_VALUES, DEEP if kind in (2, 3) else st.none(), st.just("x" * 5000))
    )
    doc.update(draw(st.dictionaries(STRINGS, JSON_VALUES, max_size=3)))
    return doc


# -- delivery --------------------------------------------------------------------------------

NAME = re.compile(r"^[_A-Za-z][_0-9A-Za-z]*$")


def literal(value: Any, type_: graphql.GraphQLInputType) -> str | None:
    """`value` as a GraphQL literal of `type_`, or None when it has no literal form (or is
    nested too deeply to render here: those travel as variables)."""
    if isinstance(value, list | dict) and depth(value) > 100:
        return None
    named = graphql.get_named_type(type_)
    if value is None:
        return "null"
    if isinstance(named, graphql.GraphQLEnumType) and isinstance(value, str):
        return value if NAME.match(value) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        # \u escapes carry NUL, controls and lone surrogates through the query text.
        return json.dumps(value, ensure_ascii=True)
    of = type_.of_type if isinstance(type_, graphql.GraphQLNonNull) else type_
    if isinstance(value, list):
        item = of.of_type if isinstance(of, graphql.GraphQLList) else of
        parts = [literal(v, item) for v in value]
        return None if None in parts else "[" + ", ".join(p for p in parts if p) + "]"
    if isinstance(value, dict):
        fields = getattr(named, "fields", {})
        parts = []
        for key, item in value.items():
            if not NAME.match(key):
                return None
            inner = fields[key].type if key in fields else graphql.GraphQLString
            rendered = literal(item, inner)
            if rendered is None:
                return None
            parts.append(f"{key}: {rendered}")
        return "{" + ", ".join(str(p) for p in parts) + "}"
    return None


def body_of(query: str, variables: dict[str, Any]) -> bytes:
    # ensure_ascii: lone surrogates travel as \u escapes (the server must refuse them).
    return json.dumps({"query": query, "variables": variables}, ensure_ascii=True).encode()


INTERNALS = (
    "Traceback",
    'File "',
    "sqlalchemy",
    "asyncpg",
    "aiosqlite",
    "sqlite3",
    "SELECT ",
    "INSERT INTO",
    "DELETE FROM",
    "UPDATE conversation",
    "IntegrityError",
    "Unexpected error",
    "INTERNAL",
)


def assert_clean_answer(response: httpx.Response, sent: bytes) -> dict[str, Any] | None:
    """No 5xx, a JSON body, no internals (unless the request itself carried the word).

    Returns the body of a 200, None for a 4xx."""
    assert response.status_code < 500, response.text[:2000]
    request_text = sent.decode("utf-8", "replace")
    for word in INTERNALS:
        assert word not in response.text or word in request_text, (word, response.text[:2000])
    body: dict[str, Any] = response.json()
    if response.status_code >= 400:
        assert body["errors"] and body["errors"][0]["message"], body
        return None
    assert response.status_code == 200, response.text[:500]
    for error in body.get("errors", []):
        assert error.get("extensions", {}).get("code") not in ("INTERNAL",), body
    return body


# -- the app under test ----------------------------------------------------------------------


@dataclasses.dataclass
class Target:
    client: GraphQLClient
    records: Records
    ids: dict[str, str]

    async def send(self, query: str, variables: dict[str, Any]) -> tuple[httpx.Response, bytes]:
        body = body_of(query, variables)
        return await self.client.post_body(body), body

    async def stored(self) -> dict[str, Any]:
        return await holdings(self.client, self.records)


@pytest.fixture
async def target(settings: Settings) -> AsyncIterator[Target]:
    """An app with small message limits (so that "too large" is cheap to generate) and one
    record of every kind, owned by the client."""
    small = settings.replace(
        max_message_bytes=MAX_MESSAGE_BYTES, max_messages_per_call=MAX_MESSAGES
    )
    async with serving(small) as (server, http):
        client = GraphQLClient(http, await server.token())
        records = await seed(client)
        ids = {
            "@conversation": records.conversation,
            "@child": records.child,
            "@running": records.running,
            "@completed": records.completed,
            "@snapshot": records.snapshot,
            "@lock": records.lock_token,
        }
        yield Target(client, records, ids)


# -- message documents -----------------------------------------------------------------------


def walk(value: Any) -> Iterator[tuple[Any, int]]:
    """Every value inside `value` (keys too) with its depth; iterative, for deep documents."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        yield item, level
        if isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
        elif isinstance(item, dict):
            stack.extend((k, level + 1) for k in item)
            stack.extend((v, level + 1) for v in item.values())


def encodable(value: Any) -> bool:
    """Whether JSON text can hold it: no lone surrogate in any string, key or value."""
    for item, _ in walk(value):
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def depth(value: Any) -> int:
    return max(level + isinstance(item, list | dict) for item, level in walk(value))


def verdict(doc: Any) -> str | None:
    """Why the server must refuse this message, or None when it must store it."""
    if not isinstance(doc, dict):
        return "INVALID_INPUT"
    role = doc.get("role")
    if not isinstance(role, str) or not role.strip() or "\x00" in role:
        return "INVALID_INPUT"
    if not encodable(doc) or depth(doc) > 250:
        return "INVALID_INPUT"
    size = len(json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode())
    # orjson and json differ a little on floats; only sizes far from the limit are asserted.
    if size > MAX_MESSAGE_BYTES * 1.2:
        return "LIMIT_EXCEEDED"
    if size > MAX_MESSAGE_BYTES * 0.8:
        return "EITHER"
    return None


def same(a: Any, b: Any) -> bool:
    """Equal and of the same JSON types throughout (1 is not 1.0, False is not 0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


WRITE_MESSAGES = {
    "appendMessages": ("AppendMessagesInput", "messages { seq data }"),
    "replaceTranscript": ("ReplaceTranscriptInput", "conversation { messageCount transcript }"),
    "saveSnapshot": ("SaveSnapshotInput", "snapshot { messageCount messages }"),
}


async def message_property(
    target: Target, mutation: str, batch: list[Any], as_literal: bool
) -> None:
    input_type, selection = WRITE_MESSAGES[mutation]
    cid = target.records.conversation
    messages = (
        literal(batch, graphql.GraphQLList(schema().type_map["JSON"])) if as_literal else None
    )
    if messages is not None:
        query = (
            f'mutation {{ {mutation}(input: {{conversationId: "{cid}", messages: {messages}}}) '
            f"{{ {selection} userErrors {{ code field message }} }} }}"
        )
        variables: dict[str, Any] = {}
    else:
        query = (
            f"mutation($input: {input_type}!) {{ {mutation}(input: $input) "
            f"{{ {selection} userErrors {{ code field message }} }} }}"
        )
        variables = {"input": {"conversationId": cid, "messages": batch}}
    before = await target.stored()
    response, sent = await target.send(query, variables)
    body = assert_clean_answer(response, sent)
    reasons = [verdict(doc) for doc in batch]
    must_refuse = next((i for i, r in enumerate(reasons) if r not in (None, "EITHER")), None)
    if body is None or "errors" in body:
        # Refused before it reached the resolver: a null where JSON! is required, a lone
        # surrogate (neither JSON nor a GraphQL string may carry one), or nesting past what
        # a request may hold.
        assert None in batch or not encodable(batch) or any(depth(d) > 250 for d in batch), (
            batch,
            response.text,
        )
        assert await target.stored() == before
        return
    payload = body["data"][mutation]
    if payload["userErrors"]:
        (error,) = payload["userErrors"]
        refused_as = error["code"]
        if mutation == "appendMessages" and not batch:
            assert (refused_as, error["field"]) == ("INVALID_INPUT", ["messages"])
        elif len(batch) > MAX_MESSAGES and mutation == "appendMessages":
            assert (refused_as, error["field"]) == ("LIMIT_EXCEEDED", ["messages"])
        else:
            assert must_refuse is not None or "EITHER" in reasons, (batch, payload)
            index = int(error["field"][1])
            assert error["field"] == ["messages", str(index)]
            assert reasons[index] in (refused_as, "EITHER") or (
                reasons[index] == "LIMIT_EXCEEDED" and refused_as == "INVALID_INPUT"
            ), (batch[index], error)
            assert all(r in (None, "EITHER") for r in reasons[:index]), (reasons, error)
        assert all(v in (None, []) for k, v in payload.items() if k != "userErrors"), payload
        assert await target.stored() == before
        return
    assert must_refuse is None, (batch, payload)
    assert not (mutation == "appendMessages" and not batch)
    assert len(batch) <= MAX_MESSAGES or mutation != "appendMessages"
    if mutation == "appendMessages":
        stored = [m["data"] for m in payload["messages"]]
    elif mutation == "replaceTranscript":
        stored = payload["conversation"]["transcript"]
    else:
        stored = payload["snapshot"]["messages"]
    assert same(stored, batch), (stored, batch)
    # And it reads back the same later, from the database rather than from the write.
    if mutation != "saveSnapshot":
        transcript = (await target.stored())["conversation"]["transcript"]
        tail = transcript[len(transcript) - len(batch) :] if batch else []
        assert same(tail, batch)


@pytest.mark.parametrize("mutation", list(WRITE_MESSAGES))
@hypothesis_settings(EXAMPLES)
@given(batch=st.lists(message_documents(), max_size=MAX_MESSAGES + 1), as_literal=st.booleans())
async def test_message_documents_are_stored_exactly_or_refused_cleanly(
    target: Target, mutation: str, batch: list[Any], as_literal: bool
) -> None:
    await message_property(target, mutation, batch, as_literal)


@pytest.mark.slow
@pytest.mark.parametrize("mutation", list(WRITE_MESSAGES))
@hypothesis_settings(SLOW_EXAMPLES)
@given(batch=st.lists(message_documents(), max_size=MAX_MESSAGES + 1), as_literal=st.booleans())
async def test_message_documents_long(
    target: Target, mutation: str, batch: list[Any], as_literal: bool
) -> None:
    await message_property(target, mutation, batch, as_literal)


# -- every argument and input field ----------------------------------------------------------

# Values a field needs to get past "not found", by field name; the rest is drawn by type.
ID_FIELDS = {
    "id": ["@conversation", "@child", "@running", "@snapshot"],
    "conversationId": ["@conversation", "@child"],
    "parentConversationId": ["@conversation", "@child"],
    "delegationId": ["@running", "@completed"],
    "token": ["@lock"],
}
# Writes that would remove what the other examples write to are sent only with made-up ids.
DESTRUCTIVE = {"deleteConversation", "deleteSessionState"}


def session_state_values() -> st.SearchStrategy[Any]:
    good = st.builds(
        lambda sid, env, facts: {
            "session_id": sid,
            "active_envelope": {"id": env, "facts": facts},
            "logical_facts": facts,
        },
        st.sampled_from(["s-1", "session-1"]) | STRINGS,
        st.sampled_from(["env-1"]) | STRINGS,
        st.lists(STRINGS, max_size=3),
    )
    return good | JSON_VALUES | DEEP


def value_for(type_: graphql.GraphQLInputType, name: str, operation: str) -> st.SearchStrategy[Any]:
    """Any value for an argument or input field: valid, an edge case, or a wrong type."""
    if isinstance(type_, graphql.GraphQLNonNull):
        return st.one_of(value_for(type_.of_type, name, operation), st.none())
    if isinstance(type_, graphql.GraphQLList):
        item = value_for(type_.of_type, name, operation)
        if name == "messages":
            item = message_documents()
        return st.one_of(st.lists(item, max_size=4), item, WRONG_TYPE)
    if isinstance(type_, graphql.GraphQLInputObjectType):
        return input_object(type_, operation)
    if isinstance(type_, graphql.GraphQLEnumType):
        return st.sampled_from(list(type_.values)) | st.sampled_from(["NOPE", "", "completed"])
    scalar = type_.name
    if scalar in ("ID", "String") and name in ID_FIELDS and operation not in DESTRUCTIVE:
        return st.sampled_from(ID_FIELDS[name]) | STRINGS
    options: dict[str, st.SearchStrategy[Any]] = {
        "ID": STRINGS,
        "String": STRINGS,
        "Int": INTS,
        "Boolean": st.booleans(),
        "DateTime": DATES,
        "JSON": session_state_values() if name == "state" else JSON_VALUES | DEEP,
    }
    return st.one_of(options.get(scalar, JSON_VALUES), WRONG_TYPE)


def input_object(type_: graphql.GraphQLInputObjectType, operation: str) -> st.SearchStrategy[Any]:
    fields = {
        name: st.one_of(st.just(...), value_for(f.type, name, operation))
        for name, f in type_.fields.items()
    }
    return st.fixed_dictionaries(fields).map(lambda d: {k: v for k, v in d.items() if v is not ...})


def selection(type_: graphql.GraphQLOutputType, depth_left: int = 2) -> str:
    """A small selection of scalar fields under an object type (argument-free fields only)."""
    named = graphql.get_named_type(type_)
    if not isinstance(named, graphql.GraphQLObjectType | graphql.GraphQLInterfaceType):
        return ""
    parts = ["__typename"]
    for name, field in named.fields.items():
        if any(a.type for a in field.args.values() if isinstance(a.type, graphql.GraphQLNonNull)):
            continue
        inner = graphql.get_named_type(field.type)
        if isinstance(inner, graphql.GraphQLScalarType | graphql.GraphQLEnumType):
            parts.append(name)
        elif depth_left > 0 and name in ("userErrors", "nodes", "conversation", "delegation"):
            parts.append(f"{name} {selection(field.type, depth_left - 1)}")
    return "{ " + " ".join(parts) + " }"


def substitute(value: Any, ids: dict[str, str], levels: int = 2) -> Any:
    """The placeholders of ID_FIELDS replaced by the seeded ids (they sit at most in an
    argument's input object: deeper values are left alone)."""
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, dict) and levels:
        return {k: substitute(v, ids, levels - 1) for k, v in value.items()}
    return value


@st.composite
def operations(draw: st.DrawFn) -> tuple[str, str, dict[str, Any], dict[str, str]]:
    """(kind, field, argument values, how each argument travels: variable or literal)."""
    kind = draw(st.sampled_from(["query", "mutation"]))
    root = schema().query_type if kind == "query" else schema().mutation_type
    assert root is not None
    candidates = sorted(n for n, f in root.fields.items() if f.args)
    name = draw(st.sampled_from(candidates))
    args = {}
    how = {}
    for arg_name, arg in root.fields[name].args.items():
        if not isinstance(arg.type, graphql.GraphQLNonNull) and draw(st.booleans()):
            continue
        args[arg_name] = draw(value_for(arg.type, arg_name, name))
        how[arg_name] = draw(st.sampled_from(["variable", "literal"]))
    return kind, name, args, how


def render(
    kind: str, name: str, args: dict[str, Any], how: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    root = schema().query_type if kind == "query" else schema().mutation_type
    assert root is not None
    field = root.fields[name]
    definitions, arguments, variables = [], [], {}
    for arg_name, value in args.items():
        arg_type = field.args[arg_name].type
        rendered = literal(value, arg_type) if how[arg_name] == "literal" else None
        if rendered is None:
            definitions.append(f"${arg_name}: {arg_type}")
            arguments.append(f"{arg_name}: ${arg_name}")
            variables[arg_name] = value
        else:
            arguments.append(f"{arg_name}: {rendered}")
    head = f"{kind}({', '.join(definitions)})" if definitions else kind
    call = f"{name}({', '.join(arguments)})" if arguments else name
    return f"{head} {{ {call} {selection(field.type)} }}", variables


# Input fields a successful write echoes back, and where the payload shows them.
ECHOES = {
    "createConversation": ("conversation", ["title", "agentSlug", "context", "metadata"]),
    "updateConversation": ("conversation", ["title", "provider", "model", "providerResponseId"]),
    "createDelegation": ("delegation", ["delegatingTier", "targetTier", "task"]),
}


async def field_property(
    target: Target, op: tuple[str, str, dict[str, Any], dict[str, str]]
) -> None:
    kind, name, args, how = op
    args = substitute(args, target.ids)
    query, variables = render(kind, name, args, how)
    before = await target.stored()
    response, sent = await target.send(query, variables)
    body = assert_clean_answer(response, sent)
    rejected = body is None or bool(body.get("errors")) or body["data"] is None
    payload = None if rejected or body is None else body["data"][name]
    if kind == "mutation" and payload is not None:
        rejected = bool(payload["userErrors"])
        if rejected:
            assert all(
                v in (None, False, [])
                for k, v in payload.items()
                if k not in ("userErrors", "__typename")
            ), (name, args, payload)
        elif name in ECHOES and args["input"].get("idempotencyKey") is None:
            # (a create with a key may return the conversation an earlier example made)
            holder, echoed = ECHOES[name]
            sent_input = args["input"]
            for key in echoed:
                if isinstance(sent_input.get(key), str | dict):
                    assert same(payload[holder][key], sent_input[key]), (key, payload, sent_input)
    if kind == "query" or rejected:
        # Reads never write; refused writes write nothing.
        after = await target.stored()
        assert after == as_of(before, datetime.now(UTC)), (query, variables, response.text[:500])


def as_of(holding: dict[str, Any], now: datetime) -> dict[str, Any]:
    """`holding` as it reads at `now`: a lock past its expiry by then reads as none (an
    earlier example may have taken one for a second, with the lock token it was given)."""
    conversation: dict[str, Any] | None = holding.get("conversation")
    until = conversation.get("lockedUntil") if conversation else None
    if conversation and until and datetime.fromisoformat(until) <= now:
        return {**holding, "conversation": {**conversation, "lockedUntil": None}}
    return holding


@hypothesis_settings(EXAMPLES * 4)
@given(op=operations())
async def test_every_argument_and_input_field_is_answered_cleanly(
    target: Target, op: tuple[str, str, dict[str, Any], dict[str, str]]
) -> None:
    await field_property(target, op)


@pytest.mark.slow
@hypothesis_settings(SLOW_EXAMPLES * 2)
@given(op=operations())
async def test_every_argument_and_input_field_long(
    target: Target, op: tuple[str, str, dict[str, Any], dict[str, str]]
) -> None:
    await field_property(target, op)


# -- regressions found by the suites ---------------------------------------------------------


async def test_deeply_nested_json_with_a_long_number_is_400_not_500(gql: GraphQLClient) -> None:
    # The exact-number parser (used when a document holds 16+ digit numbers) recursed past
    # Python's limit on JSON nested ~1000 deep, and the RecursionError became a 500.
    deep = "[" * 3000 + "12345678901234567890" + "]" * 3000
    body = '{"query": "query($e: JSON!) { extractFacts(envelope: $e) }", "variables": {"e": %s}}'
    response = await gql.post_body((body % deep).encode())
    assert response.status_code == 400, response.text
    assert "JSON" in response.json()["errors"][0]["message"]
    # The same nesting without a long number was always a 400: both paths agree now.
    response = await gql.post_body((body % ("[" * 3000 + "1" + "]" * 3000)).encode())
    assert response.status_code == 400, response.text


EXACT = b'{"n":0.30000000000000000001,"big":12345678901234567890.5,"i":123456789012345678901}'


async def test_numbers_with_more_digits_than_a_float_holds_are_stored_as_written(
    gql: GraphQLClient,
) -> None:
    # They came back as 0.3 and 1.2345678901234567e+19: read as binary floats.
    cid = await create(gql)
    body = b'{"query": %s, "variables": {"id": "%s", "m": [{"role": "user", "content": %s}]}}'
    sent = body % (orjson.dumps(APPEND), cid.encode(), EXACT)
    assert (await gql.post_body(sent)).json()["data"]["appendMessages"]["userErrors"] == []
    read = await gql.post(READ, {"id": cid})
    assert b'"content":' + EXACT in read.content, read.text
    # In a literal too.
    literal = EXACT.decode().replace('"n"', "n").replace('"big"', "big").replace('"i"', "i")
    made = await gql.post(
        f"mutation {{ createConversation(input: {{metadata: {literal}}}) {{"
        " conversation { metadata } } }"
    )
    assert b'"metadata":' + EXACT in made.content, made.text


async def test_a_number_with_an_exponent_past_what_decimal_holds_is_stored_not_a_500(
    gql: GraphQLClient,
) -> None:
    # Beside a long number (the exact parser's path) it raised decimal's InvalidOperation.
    cid = await create(gql)
    body = b'{"query": %s, "variables": {"id": "%s", "m": [{"role": "user", "content": %s}]}}'
    content = b"[0e99999999999999999999,1e-99999999999999999999,1234567890123456]"
    sent = body % (orjson.dumps(APPEND), cid.encode(), content)
    response = await gql.post_body(sent)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["appendMessages"]["userErrors"] == []
    read = await gql.post(READ, {"id": cid})
    # A zero is the float zero; the other is no float's number, and keeps its text.
    assert b'"content":[0.0,1e-99999999999999999999,1234567890123456]' in read.content


# Numbers past a double's smallest normal whose double is another number: 0.0, 5e-324 and
# 2.225073858507203e-309, 1.2347e-320, -0.0. Each with a number whose double is itself.
TINY = (
    b"[1e-400,4.9406564584124654e-324,2.2250738585072014e-309,1.2345e-320,-1e-400,"
    b"5e-324,1e-310,-0.0]"
)


@pytest.mark.parametrize("beside", [b"", b',"pad":1234567890123456'])
async def test_numbers_past_a_doubles_smallest_normal_are_stored_as_written(
    gql: GraphQLClient, beside: bytes
) -> None:
    # They were stored as their double: a different number, and no error said so. Alone,
    # and beside a long number (the exact parser's path).
    cid = await create(gql)
    body = b'{"query": %s, "variables": {"id": "%s", "m": [{"role": "user", "content": %s%s}]}}'
    sent = body % (orjson.dumps(APPEND), cid.encode(), TINY, beside)
    response = await gql.post_body(sent)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["appendMessages"]["userErrors"] == []
    assert b'"content":' + TINY + beside in response.content
    # In a literal too.
    literal = f'{{role: "user", content: {TINY.decode()}}}'
    document = (
        f'mutation {{ appendMessages(input: {{conversationId: "{cid}", messages: [{literal}]}})'
        " { userErrors { code } } }"
    )
    assert (await gql(document))["appendMessages"]["userErrors"] == []
    read = await gql.post(READ, {"id": cid})
    stored = b'{"role":"user","content":' + TINY
    assert b'"transcript":[' + stored + beside + b"}," + stored + b"}]" in read.content


async def test_an_integer_past_4300_digits_is_refused_saying_the_limit(gql: GraphQLClient) -> None:
    # Python reads at most 4,300 digits of an integer (int()'s guard against a quadratic
    # conversion): the body's was a 400 "Unable to parse request body as JSON", the
    # literal's graphql-core read as NaN and refused as "JSON numbers must be finite".
    cid = await create(gql)
    body = b'{"query": %s, "variables": {"id": "%s", "m": [{"role": "user", "content": %s}]}}'
    limit = "JSON integers may have at most 4300 digits"
    for number in (b"1" * 4301, b"-" + b"9" * 20_000):
        response = await gql.post_body(body % (orjson.dumps(APPEND), cid.encode(), number))
        assert response.status_code == 400, response.text
        assert response.json() == {
            "errors": [{"message": limit, "extensions": {"code": "BAD_REQUEST"}}]
        }
        document = (
            f'mutation {{ appendMessages(input: {{conversationId: "{cid}", '
            f'messages: [{{role: "user", content: {number.decode()}}}]}}) '
            "{ userErrors { code } } }"
        )
        answer = (await gql.post(document)).json()
        assert answer["data"] is None, answer
        assert [e["message"] for e in answer["errors"]] == [limit]
    read = await gql.post(READ, {"id": cid})
    assert read.json()["data"]["conversation"]["messageCount"] == 0
    # As many digits as Python reads are stored, and read back as sent.
    most = b"-" + b"7" * 4300
    response = await gql.post_body(body % (orjson.dumps(APPEND), cid.encode(), most))
    assert response.json()["data"]["appendMessages"]["userErrors"] == []
    read = await gql.post(READ, {"id": cid})
    assert b'"transcript":[{"role":"user","content":' + most + b"}]" in read.content


async def test_a_body_of_many_long_integers_is_refused_before_it_holds_the_server(
    gql: GraphQLClient,
) -> None:
    """Each long integer's conversion grows with the square of its digits, on the event
    loop: a 32 MB body of 7,800 integers of 4,300 digits held every other request for three
    seconds. A body's long integers may hold a million digits in all."""
    cid = await create(gql)
    numbers = b",".join([b"7" * 4000] * 300)
    body = b'{"query": %s, "variables": {"id": "%s", "m": [{"role": "user", "content": [%s]}]}}'
    response = await gql.post_body(body % (orjson.dumps(APPEND), cid.encode(), numbers))
    assert response.status_code == 400, response.text
    limit = "a JSON document may hold at most 1,000,000 digits in integers of more than 64 digits"
    assert response.json() == {
        "errors": [{"message": limit, "extensions": {"code": "BAD_REQUEST"}}]
    }
    read = await gql.post(READ, {"id": cid})
    assert read.json()["data"]["conversation"]["messageCount"] == 0


async def test_a_number_past_a_doubles_range_in_a_body_is_refused_saying_so(
    gql: GraphQLClient,
) -> None:
    # It was a 400 "Unable to parse request body as JSON", of a body that is JSON.
    cid = await create(gql)
    body = b'{"query": %s, "variables": {"id": "%s", "m": [{"role": "user", "content": %s}]}}'
    for number in (b"1e400", b"[-1e99999,1234567890123456]"):
        response = await gql.post_body(body % (orjson.dumps(APPEND), cid.encode(), number))
        assert response.status_code == 400, response.text
        (error,) = response.json()["errors"]
        assert error["message"].startswith("JSON numbers must be finite: at most 1.79"), error


async def test_the_bytes_of_a_surrogate_are_a_400_beside_a_long_number(gql: GraphQLClient) -> None:
    # Beside a long number the exact parser let them through, and the search that received
    # them answered INTERNAL; alone they were always a 400.
    query = orjson.dumps("query($s: String) { conversations(filter: {search: $s}) { totalCount } }")
    for extra in (b"", b', "n": 1234567890123456'):
        body = b'{"query": %s, "variables": {"s": "a\xed\xa0\x80"%s}}' % (query, extra)
        response = await gql.post_body(body)
        assert response.status_code == 400, response.text


WITH_METADATA = """mutation($m: JSON) { createConversation(input: {metadata: $m}) {
  conversation { id metadata } userErrors { code } } }"""
RECENT = "query($t: ID) { recentPendingConversation(tokenId: $t) { id } }"


async def test_nul_in_metadata_leaves_the_token_id_lookup_working(gql: GraphQLClient) -> None:
    # PostgreSQL's json `->>` refuses to turn \u0000 into text: a NUL anywhere in one
    # conversation's metadata must not break the tokenId lookup over all of them.
    odd = {"token_id": "t\x00", "note": "a\x00b"}
    made = (await gql(WITH_METADATA, {"m": odd}))["createConversation"]
    assert made["userErrors"] == [] and made["conversation"]["metadata"] == odd
    plain = (await gql(WITH_METADATA, {"m": {"token_id": "t1"}}))["createConversation"]
    found = await gql(RECENT, {"t": "t1"})
    assert found == {"recentPendingConversation": {"id": plain["conversation"]["id"]}}
    assert await gql(RECENT, {"t": "t\x00"}) == {"recentPendingConversation": None}


async def test_the_token_id_lookup_reads_past_newer_metadata_holding_nul(
    gql: GraphQLClient,
) -> None:
    # Whichever row a plan reaches first: here the newest ones hold \u0000 (in the looked-up
    # value, elsewhere, or as an escaped backslash), and the lookup must get past them.

    async def made(metadata: dict[str, str]) -> str:
        payload = (await gql(WITH_METADATA, {"m": metadata}))["createConversation"]
        assert payload["userErrors"] == []
        cid: str = payload["conversation"]["id"]
        return cid

    plain = await made({"token_id": "t1"})
    beside = await made({"token_id": "t2", "note": "a\x00b"})
    backslash = await made({"token_id": "\\u0000 literally"})
    await made({"token_id": "t\x00"})
    assert await gql(RECENT, {"t": "t1"}) == {"recentPendingConversation": {"id": plain}}
    assert await gql(RECENT, {"t": "t2"}) == {"recentPendingConversation": {"id": beside}}
    assert await gql(RECENT, {"t": "\\u0000 literally"}) == {
        "recentPendingConversation": {"id": backslash}
    }


async def test_the_token_id_lookup_reads_past_a_newer_nested_token_id_beside_nul(
    gql: GraphQLClient,
) -> None:
    # PostgreSQL matches a document holding \u0000 by its text: the newest such match, whose
    # token_id was a nested object's, hid the session that holds it (SQLite found it).
    retried = (await gql(WITH_METADATA, {"m": {"token_id": "t5"}}))["createConversation"]
    nested = {"request": {"token_id": "t5"}, "note": "a\x00b"}
    assert (await gql(WITH_METADATA, {"m": nested}))["createConversation"]["userErrors"] == []
    assert await gql(RECENT, {"t": "t5"}) == {
        "recentPendingConversation": {"id": retried["conversation"]["id"]}
    }


@pytest.mark.parametrize(
    ("stored", "asked", "found"),
    [
        ("t-7", "t-7", True),
        (7, "7", True),
        (12345678901234567890, "12345678901234567890", True),  # past 64 bits: its digits
        (1.5, "1.5", True),
        (True, "true", False),  # SQLite matched "1", PostgreSQL "true"
        (True, "1", False),
        (None, "null", False),
        ({"id": 7}, '{"id":7}', False),
    ],
)
@pytest.mark.parametrize("beside", [{}, {"note": "a\x00b"}], ids=["alone", "beside-nul"])
async def test_the_token_id_lookup_matches_a_string_or_a_number_alike_on_both_backends(
    gql: GraphQLClient, stored: Any, asked: str, found: bool, beside: dict[str, str]
) -> None:
    # A NUL elsewhere in the metadata changes nothing: a number (WordPress's int token id)
    # was not found then, on either backend, and a retried request made a second session.
    metadata = {"token_id": stored, **beside}
    made = (await gql(WITH_METADATA, {"m": metadata}))["createConversation"]
    answer = (await gql(RECENT, {"t": asked}))["recentPendingConversation"]
    assert answer == ({"id": made["conversation"]["id"]} if found else None)


@pytest.mark.parametrize(
    "literal",
    [
        'createConversation(input: {title: "x", metadata: {score: 1e400}}) { conversation { id } }',
        'appendMessages(input: {conversationId: $id, messages: [{role: "user", n: -1e400}]})'
        " { messages { seq } }",
    ],
)
async def test_an_infinite_number_in_a_json_literal_is_the_request_s_error(
    gql: GraphQLClient, literal: str
) -> None:
    cid = await create(gql)
    uses_id = "$id" in literal
    document = f"mutation{'($id: ID!)' if uses_id else ''} {{ {literal} }}"
    response = await gql.post(document, {"id": cid} if uses_id else None)
    body = response.json()
    assert body["data"] is None, body
    # The same words as for 1e400 in the variables: the range it must be in.
    assert [e["message"] for e in body["errors"]] == [str(jsoncodec.out_of_range())], body
    assert body["errors"][0]["message"].startswith("JSON numbers must be finite: at most 1.79")
    assert all(e.get("extensions", {}).get("code") != "INTERNAL" for e in body["errors"])
    assert (await gql(COUNT))["conversations"]["totalCount"] == 1  # nothing else stored


async def test_a_variable_left_unset_inside_a_json_literal_is_left_out_as_graphql_leaves_it(
    gql: GraphQLClient,
) -> None:
    # It was INVALID_INPUT saying "Type is not JSON serializable: UndefinedType".
    document = """mutation($x: Int, $y: Int) {
      createConversation(input: {title: "t", metadata: {a: $x, b: [$x, 1], c: $y, d: {e: $x}}}) {
        conversation { metadata } userErrors { code message } } }"""
    made = (await gql(document, {"y": 2}))["createConversation"]
    assert made["userErrors"] == []
    assert made["conversation"]["metadata"] == {"b": [None, 1], "c": 2, "d": {}}
