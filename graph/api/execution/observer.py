"""What each operation did, for operators: its name, type, outcome and user-error codes.

The server's access log sees HTTP requests; it cannot see inside GraphQL. This extension
learns each operation's name, type and outcome (ok, user_error, error) and the codes of
its errors and user errors, and hands an OperationRecord to the context's OperationLog
(the server counts it and writes it into the request's log line; a WebSocket operation
gets a line of its own). It sees errors before they are masked.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    get_operation_ast,
)
from strawberry.extensions import SchemaExtension

from graph.api.context import Context, OperationRecord
from graph.api.execution.documents import kept
from graph.api.execution.masking import REQUEST_ERRORS, is_expected, request_refusal_code
from graph.domain.errors import DomainError
from graph.store.errors import is_unavailable

OK, USER_ERROR, ERROR = "ok", "user_error", "error"
_RANK = {OK: 0, USER_ERROR: 1, ERROR: 2}
# Codes of errors that the server, not the client, is to blame for (see masking.py).
INTERNAL_CODES = frozenset({"INTERNAL", "DATABASE_UNAVAILABLE"})
# What a GraphQL operation name may be (capped); anything else a client sends is "invalid".
OPERATION_NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]{0,99}")


# Raised out of an operation when the request itself is wrong (no query, a mutation over GET).
def worst(outcomes: Iterable[str]) -> str:
    return max(outcomes, key=_RANK.__getitem__, default=OK)


def classify(error: GraphQLError) -> tuple[str, str]:
    """(outcome, code) of one GraphQL error, masked or not."""
    original = error.original_error
    if original is not None and not is_expected(error):
        return ERROR, "DATABASE_UNAVAILABLE" if is_unavailable(original) else "INTERNAL"
    if isinstance(original, DomainError):
        return USER_ERROR, original.code.value
    code = (error.extensions or {}).get("code")
    if code in INTERNAL_CODES:
        return ERROR, str(code)
    if isinstance(code, str):
        return USER_ERROR, code
    # No code: graphql-core refused the request itself (syntax, validation, variables).
    return USER_ERROR, request_refusal_code(error)


def _fields(
    selection_set: SelectionSetNode | None, fragments: dict[str, FragmentDefinitionNode]
) -> Iterator[FieldNode]:
    """The fields of a selection set, with its fragments' fields in place."""
    for selection in selection_set.selections if selection_set else ():
        if isinstance(selection, FieldNode):
            yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from _fields(selection.selection_set, fragments)
        elif isinstance(selection, FragmentSpreadNode) and selection.name.value in fragments:
            yield from _fields(fragments[selection.name.value].selection_set, fragments)


def _key(node: FieldNode) -> str:
    return node.alias.value if node.alias else node.name.value


# Where a document's mutation payloads carry their userErrors' codes: (payload key,
# [(userErrors key, code key or None)]) per root field. Computed once per parsed document
# (documents.py keeps one per query text), keyed by identity, the document held with it.
_Paths = list[tuple[str, list[tuple[str, str | None]]]]
_PATHS: dict[tuple[int, str | None], tuple[DocumentNode, _Paths]] = {}
_PATHS_KEPT = 1_000


def _error_paths(document: DocumentNode, operation_name: str | None) -> _Paths:
    key = (id(document), operation_name)
    found = _PATHS.get(key)
    if found is not None and found[0] is document:
        return found[1]
    paths: _Paths = []
    operation = get_operation_ast(document, operation_name)
    if isinstance(operation, OperationDefinitionNode) and (
        operation.operation == OperationType.MUTATION
    ):
        fragments = {
            d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
        }
        for root in _fields(operation.selection_set, fragments):
            # A field selected twice (directly and through a fragment) is one field of the
            # result.
            selected = {
                _key(f): f
                for f in _fields(root.selection_set, fragments)
                if f.name.value == "userErrors"
            }
            errors = []
            for errors_key, errors_field in selected.items():
                code_keys = [
                    _key(f)
                    for f in _fields(errors_field.selection_set, fragments)
                    if f.name.value == "code"
                ]
                errors.append((errors_key, code_keys[0] if code_keys else None))
            paths.append((_key(root), errors))
    if document.loc is not None and not kept(document.loc.source.body):
        return paths  # not kept by documents.py either: nor here, where it would live on
    if len(_PATHS) >= _PATHS_KEPT:
        _PATHS.clear()
    _PATHS[key] = (document, paths)
    return paths


def payload_error_codes(document: DocumentNode, operation_name: str | None, data: Any) -> list[str]:
    """The codes of the `userErrors` a mutation's payloads carry, as the client selected them.

    A client that does not select `userErrors` cannot see them either; then none are counted.
    """
    if not isinstance(data, dict):
        return []
    codes: list[str] = []
    for root_key, errors in _error_paths(document, operation_name):
        payload = data.get(root_key)
        if not isinstance(payload, dict):
            continue
        for errors_key, code_key in errors:
            for item in payload.get(errors_key) or ():
                code = item.get(code_key) if code_key and isinstance(item, dict) else None
                codes.append(code if isinstance(code, str) else "UNKNOWN")
    return codes


class Observer(SchemaExtension):
    """Records every operation into the context's OperationLog (see the module docstring)."""

    def __init__(self) -> None:
        self.started = 0.0
        self._outcomes: list[str] = []
        self._codes: list[str] = []
        self._streamed = False
        self._subscription = False

    def on_operation(self) -> Iterator[None]:
        self.started = time.perf_counter()
        failure: Exception | None = None
        try:
            yield
        except Exception as exc:
            failure = exc
            raise
        finally:
            self._finish(failure)

    def on_execute(self) -> Iterator[None]:
        log = self._log()
        if log is not None and self._type() == "subscription":
            log.subscription_started()
            self._subscription = True
        yield

    def on_stream_result(self, result: Any) -> Iterator[None]:
        # WebSocket operations deliver their results here.
        self._streamed = True
        self._tally(result)
        yield

    def _log(self) -> Any:
        context = self.execution_context.context
        return context.log if isinstance(context, Context) else None

    def _type(self) -> str:
        try:
            return self.execution_context.operation_type.value
        except RuntimeError:  # the document did not parse, or names no such operation
            return "unknown"

    def _tally(self, result: Any) -> None:
        for error in getattr(result, "errors", None) or ():
            outcome, code = classify(error)
            self._outcomes.append(outcome)
            self._codes.append(code)
        document = self.execution_context.graphql_document
        if document is not None:
            data = getattr(result, "data", None)
            codes = payload_error_codes(document, self.execution_context.operation_name, data)
            self._outcomes.extend(USER_ERROR for _ in codes)
            self._codes.extend(codes)

    def _finish(self, failure: Exception | None) -> None:
        log = self._log()
        if log is None:  # the schema used outside the server (a script): nothing to record
            return
        context = self.execution_context
        if not self._streamed:
            self._tally(context.result)
        if failure is not None:
            # Raised out of the operation: a syntax error (parsing runs as a stage), a
            # request that is wrong as a whole (a mutation over GET), or a bug.
            if isinstance(failure, GraphQLError):
                outcome, code = classify(failure)
            elif isinstance(failure, REQUEST_ERRORS):
                outcome, code = USER_ERROR, "BAD_REQUEST"
            else:
                outcome, code = ERROR, "INTERNAL"
            self._outcomes.append(outcome)
            self._codes.append(code)
        name = context.operation_name
        if name is not None and not OPERATION_NAME.fullmatch(name):
            name = "invalid"
        record = OperationRecord(
            name=name,
            type=self._type(),
            outcome=worst(self._outcomes),
            codes=list(self._codes),
            duration=time.perf_counter() - self.started,
            principal=getattr(context.context, "principal_", None),
        )
        log.operation_finished(record, subscription=self._subscription)
