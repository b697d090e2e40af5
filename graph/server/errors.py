"""The JSON error responses of requests refused before GraphQL runs (401, 413, …)."""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from graph.api.execution import outage_log
from graph.api.execution.masking import UNAVAILABLE
from graph.server.response_status import UNAVAILABLE_RETRY_AFTER
from graph.store.errors import is_unavailable

logger = logging.getLogger("convograph.http")


def error_response(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"errors": [{"message": message}]}, status_code=status, headers=headers)


def internal_error(exc: BaseException, request_id: str) -> JSONResponse:
    """A failure outside the resolvers, masked as the schema masks errors inside them."""
    unavailable = is_unavailable(exc)
    if unavailable:
        outage_log.unavailable(logger, request_id, exc)
    else:
        logger.error("request %s failed before execution", request_id, exc_info=exc)
    error = {
        "message": UNAVAILABLE if unavailable else "Unexpected error.",
        "extensions": {
            "code": "DATABASE_UNAVAILABLE" if unavailable else "INTERNAL",
            "requestId": request_id,
        },
    }
    if unavailable:
        headers = {"Retry-After": UNAVAILABLE_RETRY_AFTER}
        return JSONResponse({"errors": [error]}, status_code=503, headers=headers)
    return JSONResponse({"errors": [error]}, status_code=500)
