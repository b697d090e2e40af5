"""schemathesis in GraphQL mode against a running server, over every query and mutation.

schemathesis loads the schema by introspection from the live server and generates
operations with hypothesis-graphql: valid ones (positive mode) and invalid ones (negative
mode: wrong types, missing arguments, unknown fields). Every response must be a clean answer
(test_bad_input.assert_clean_answer: no 5xx, no masked internal error, no stack trace or SQL),
every error raised while resolving must be an expected one (`assert_only_expected_errors`,
this API's version of schemathesis' `not_a_server_error`), and the records stored before the
run, the fuzzer's and another owner's, read back unchanged afterwards: generated ids name
nothing, so no generated write may touch them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import graphql
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.graphql import nodes

from tests.test_bad_input import assert_clean_answer
from tests.test_isolation import holdings, seed

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]


DOMAIN_CODES = {
    "NOT_FOUND",
    "INVALID_INPUT",
    "CONFLICT",
    "LOCKED",
    "INVALID_TRANSITION",
    "POISONED_STATE",
    "LIMIT_EXCEEDED",
    "FORBIDDEN",
}


def assert_only_expected_errors(label: str, body: dict[str, Any] | None) -> None:
    """schemathesis' `not_a_server_error`, as this API defines a server error.

    schemathesis counts every error raised while resolving as a server error. Here a query
    refuses a bad argument (a forged cursor, a negative `first`) with a GraphQL error that
    carries its ErrorCode, as the contract allows: only mutations promise `userErrors`
    instead. So: an error with a path must carry a domain code and must not be a mutation's
    own; errors without a path are the document's (parse, validation, variables).
    """
    for error in (body or {}).get("errors", []):
        if "path" not in error:
            continue
        code = error.get("extensions", {}).get("code")
        assert code in DOMAIN_CODES, (label, error)
        # A mutation itself answers with userErrors; a field below its payload (say,
        # `snapshots(first: -1)` of the conversation it returns) may refuse its argument.
        assert label.startswith("Query.") or len(error["path"]) > 1, (label, error)


def json_node(value: Any) -> graphql.ValueNode:
    """A JSON value as a GraphQL literal (the custom scalar schemathesis asks a strategy for)."""
    if value is None:
        return graphql.NullValueNode()
    if isinstance(value, bool):
        return nodes.Boolean(value)
    if isinstance(value, int):
        return nodes.Int(value)
    if isinstance(value, float):
        return nodes.Float(value)
    if isinstance(value, str):
        return nodes.String(value)
    if isinstance(value, list):
        return nodes.List([json_node(v) for v in value])
    return nodes.Object(
        [
            graphql.ObjectFieldNode(name=graphql.NameNode(value=k), value=json_node(v))
            for k, v in value.items()
        ]
    )


KEYS = st.from_regex(r"\A[_a-zA-Z][_a-zA-Z0-9]{0,8}\Z")
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=10,
)
DATETIMES = st.datetimes().map(lambda d: d.isoformat() + "Z") | st.text(max_size=30)


def register_scalars() -> None:
    schemathesis.graphql.scalar("JSON", JSON_VALUES.map(json_node))
    schemathesis.graphql.scalar("DateTime", DATETIMES.map(nodes.String))


def cases(
    operation: Any, mode: GenerationMode, headers: dict[str, str], examples: int, sent: Any
) -> Any:
    """A Hypothesis test sending `examples` generated cases of one operation, checking each."""
    label = operation.label

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # report the case as found
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        response = case.call(headers=headers, timeout=30)
        as_httpx = httpx.Response(response.status_code, content=response.content)
        body = assert_clean_answer(as_httpx, str(case.body).encode())
        assert_only_expected_errors(label, body)
        sent[label] = sent.get(label, 0) + 1

    return run


def fuzz(url: str, token: str, examples: int) -> dict[str, int]:
    """Every operation, in both generation modes: the number of cases sent per operation."""
    headers = {"Authorization": f"Bearer {token}"}
    register_scalars()
    loaded = schemathesis.graphql.from_url(url, headers=headers, timeout=30)
    sent: dict[str, int] = {}
    for result in loaded.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            cases(operation, mode, headers, examples, sent)()
    return sent


@pytest.mark.parametrize(
    "examples", [pytest.param(8, id="quick"), pytest.param(100, id="long", marks=pytest.mark.slow)]
)
async def test_schemathesis_finds_no_failure_and_changes_nothing_it_does_not_name(
    live_server: LiveServer, examples: int
) -> None:
    fuzzer_token = await live_server.token(owner="user:fuzzer")
    async with (
        live_server.client(fuzzer_token) as fuzzer,
        live_server.client(await live_server.token(owner="user:bystander")) as bystander,
    ):
        theirs = await seed(bystander)
        mine = await seed(fuzzer)
        before = (await holdings(bystander, theirs), await holdings(fuzzer, mine))
        sent = await asyncio.to_thread(fuzz, live_server.http_url, fuzzer_token, examples)
        after = (await holdings(bystander, theirs), await holdings(fuzzer, mine))

    assert after[0] == before[0]
    # The fuzzer's own listing grows with what it created; its seeded records do not change.
    drop = "conversations"
    assert {k: v for k, v in after[1].items() if k != drop} == {
        k: v for k, v in before[1].items() if k != drop
    }
    operations = {"Query", "Mutation"}
    assert {label.split(".")[0] for label in sent} == operations
    assert len(sent) >= 20, sorted(sent)
    print(f"schemathesis: {sum(sent.values())} cases over {len(sent)} operations, 0 failures")
