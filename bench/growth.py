"""Figure 2: one appendMessages into a 10,000-message conversation vs into a 10-message one.

Sequential requests over HTTP, interleaved (small, big, big, small, …) so that drift on the
shared machine hits both sides alike.  Each timed append adds a message, so the small side
ends at 10 + n and the big one at 10,000 + n; both stay in their own size class.
"""

from __future__ import annotations

from .peers.run_peers import make_messages
from .report import Figure, median, ms, ms_list
from .servers import Convograph, append_body, create_conversation, message_count

TARGET = 1.2
BIG = 10_000
SMALL = 10
BATCH = 1000
WARMUP = 20


def _fill(server: Convograph, conversation_id: str, count: int) -> None:
    messages = make_messages(count)
    for start in range(0, count, BATCH):
        server.timed(append_body(conversation_id, messages[start : start + BATCH]))
    if message_count(server, conversation_id) != count:
        raise RuntimeError(f"fill of {conversation_id} did not store {count} messages")


def run(server: Convograph, *, pairs: int) -> Figure:
    small = create_conversation(server, "growth-10")
    big = create_conversation(server, "growth-10000")
    _fill(server, small, SMALL)
    _fill(server, big, BIG)
    message = make_messages(1)
    bodies = {"small": append_body(small, message), "big": append_body(big, message)}

    samples: dict[str, list[float]] = {"small": [], "big": []}
    for i in range(WARMUP + pairs):
        order = ("small", "big") if i % 2 == 0 else ("big", "small")
        for side in order:
            seconds = server.timed(bodies[side])
            if i >= WARMUP:
                samples[side].append(seconds)

    small_ms, big_ms = ms(median(samples["small"])), ms(median(samples["big"]))
    ratio = round(big_ms / small_ms, 3)
    # Cross-check that cancels slow spells: each pair's two requests ran back to back.
    paired = median([b / s for b, s in zip(samples["big"], samples["small"], strict=True)])
    return Figure(
        name="append_growth_ratio",
        value=ratio,
        target=f"<= {TARGET}",
        met=ratio <= TARGET,
        detail=(
            f"median append {big_ms:.2f} ms at {BIG:,} messages vs {small_ms:.2f} ms at "
            f"{SMALL} ({pairs} interleaved sequential pairs over HTTP; median of the per-pair "
            f"ratios {paired:.3f})"
        ),
        data={
            "paired_ratio": round(paired, 3),
            "small_ms": ms_list(samples["small"]),
            "big_ms": ms_list(samples["big"]),
        },
    )
