"""The cap on operations one token runs at once over WebSockets (subscriptions, mostly).

CONVOGRAPH_MAX_SUBSCRIPTIONS_PER_TOKEN operations, counted across every WebSocket of
this process: a `subscribe` past it is answered with an `error` (code LIMIT_EXCEEDED, the
reason below); the socket and the operations running on it go on.
Queries and mutations sent over a WebSocket hold a slot too while they run (as strawberry's
own per-connection limit counts them): whatever the operation, it is one more stream the
server keeps open for that token.

The slots are taken and given back by the WebSocket handler (transport_ws.py), whichever
way an operation ends; a `Slot` gives itself back once, however often it is released, so
the handler may release it on every path without counting twice.
"""

from __future__ import annotations


class SubscriptionSlots:
    """How many slots each token holds; `cap` 0 means no cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.refused = 0  # for the metrics
        # Operations refused past the operations one socket runs at once (transport_ws.py).
        self.refused_on_a_socket = 0
        self._held: dict[str, int] = {}

    @property
    def reason(self) -> str:
        """Why a `subscribe` past the cap is refused (its error's message)."""
        return f"too many subscriptions for this token (limit {self.cap})"

    def held(self, token_id: str) -> int:
        return self._held.get(token_id, 0)

    def take(self, token_id: str) -> Slot | None:
        """A slot for one more operation of `token_id`, or None at the cap."""
        if self.cap and self.held(token_id) >= self.cap:
            self.refused += 1
            return None
        self._held[token_id] = self.held(token_id) + 1
        return Slot(self, token_id)

    def _give_back(self, token_id: str) -> None:
        left = self.held(token_id) - 1
        if left > 0:
            self._held[token_id] = left
        else:
            self._held.pop(token_id, None)


class Slot:
    """One operation's place under the cap; `release` is safe to call any number of times."""

    __slots__ = ("_slots", "released", "token_id")

    def __init__(self, slots: SubscriptionSlots, token_id: str) -> None:
        self._slots = slots
        self.token_id = token_id
        self.released = False

    def release(self, *_: object) -> None:
        """Give the slot back (also usable as a task's done callback)."""
        if not self.released:
            self.released = True
            self._slots._give_back(self.token_id)
