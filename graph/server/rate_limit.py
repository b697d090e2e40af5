"""Per-token rate limits: a token bucket for each API token, and the 429 that refuses.

A token may make CONVOGRAPH_RATE_LIMIT_PER_SECOND requests per second on average, and up
to CONVOGRAPH_RATE_LIMIT_BURST at once after a quiet spell; an HTTP request to /graphql and
an operation sent over a WebSocket (transport_ws.py) each count as one. Each bucket is one
number, the moment it will be full again (the "theoretical arrival time" of GCRA): a
request moves it one interval (1 / rate) later, and is refused when that would put it more
than `burst` intervals past now. The check and the take happen with no await between them,
so requests that arrive together on the event loop are counted one by one: of any number
sent at once, exactly `burst` get through.

Buckets are keyed by the token's id (never its secret) and live in this process: each
replica limits on its own. A bucket that has filled up again is the same as none, so such
buckets are dropped now and then and the table holds only tokens seen lately.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from graphql import GraphQLFormattedError
from starlette.responses import JSONResponse

from graph.settings import Settings

CODE = "RATE_LIMITED"
# Floating-point sums of the interval drift by a few ulps: a request exactly at the limit
# must not be refused for that.
EPSILON = 1e-9
# The table is swept for full buckets whenever it has doubled since the last sweep.
FIRST_SWEEP = 1024


class RateLimit:
    """One token bucket per key; `per_second` 0 means no limit."""

    def __init__(
        self, per_second: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_second = per_second
        self.burst = burst
        self.clock = clock
        self.refused = 0  # for the metrics
        self._interval = 1.0 / per_second if per_second > 0 else 0.0
        self._full_at: dict[str, float] = {}
        self._sweep_at = FIRST_SWEEP

    @classmethod
    def from_settings(cls, settings: Settings) -> RateLimit:
        return cls(settings.rate_limit_per_second, settings.rate_limit_burst_size)

    @property
    def enabled(self) -> bool:
        return self.per_second > 0

    def take(self, key: str) -> float:
        """Take one request from `key`'s bucket: 0.0 when it had one, else the seconds
        until it has (and nothing is taken, so a refused request costs nothing)."""
        if not self.enabled:
            return 0.0
        now = self.clock()
        full_at = max(self._full_at.get(key, now), now) + self._interval
        over = full_at - now - self.burst * self._interval
        if over > EPSILON:
            self.refused += 1
            return over
        self._full_at[key] = full_at
        if len(self._full_at) >= self._sweep_at:
            self._sweep(now)
        return 0.0

    def describe(self) -> str:
        return f"{self.per_second:g} requests per second, burst {self.burst}"

    def _sweep(self, now: float) -> None:
        self._full_at = {key: at for key, at in self._full_at.items() if at > now}
        self._sweep_at = max(FIRST_SWEEP, 2 * len(self._full_at))


def retry_after(wait: float) -> int:
    """`Retry-After` is whole seconds; rounded up, so a client that waits that long gets in."""
    return max(1, math.ceil(wait))


def rate_limited_error(limit: RateLimit, wait: float) -> GraphQLFormattedError:
    """The GraphQL error of a refused request (HTTP body, or WebSocket `error` payload)."""
    seconds = retry_after(wait)
    return GraphQLFormattedError(
        message=f"rate limit exceeded for this token: {limit.describe()}; retry after {seconds} s",
        extensions={"code": CODE, "retryAfterSeconds": seconds},
    )


def too_many_requests(limit: RateLimit, wait: float) -> JSONResponse:
    """HTTP 429 with `Retry-After`; nothing of the request was run."""
    return JSONResponse(
        {"errors": [rate_limited_error(limit, wait)]},
        status_code=429,
        headers={"Retry-After": str(retry_after(wait))},
    )
