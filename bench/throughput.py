"""Figure 1: appendMessages requests/s over HTTP at concurrency 16, against the floor.

Both servers take the same message per request, all into ONE conversation (the floor's
"c1", convograph's one pre-created conversation): SQLite has a single writer whatever the
conversation, so spreading the load would only hide the per-request cost.  They are run
alternately (floor, group-commit floor, convograph, floor, …) and the figure is the median
of the per-round ratios to the floor (one COMMIT per request); the group-commit floor (the
floor's INSERTs sharing COMMITs, as convograph's do) is reported beside it.
"""

from __future__ import annotations

from typing import Any

import orjson

from .load import run_wrk
from .peers.run_peers import make_messages
from .report import Figure, median
from .servers import (
    Client,
    Convograph,
    Floor,
    Process,
    append_body,
    create_conversation,
    message_count,
)

TARGET = 0.25


def _wrk(
    process: Process, url: str, body: bytes, headers: dict[str, str], seconds: float
) -> dict[str, Any]:
    cpu = process.cpu_seconds()
    result = run_wrk(url=url, body=body, headers=headers, seconds=seconds, connections=16)
    # CPU per request is steadier than req/s on a shared machine: it says where time goes.
    cpu = process.cpu_seconds() - cpu
    result["server_cpu_ms_per_request"] = round(cpu * 1000 / max(1, result["requests"]), 3)
    result.pop("report")
    if result["non_2xx"] or any(result["socket_errors"].values()):
        raise RuntimeError(f"wrk saw failures against {url}: {result}")
    return result


def run(server: Convograph, floor: Floor, *, rounds: int, seconds: float) -> Figure:
    message = make_messages(1)[0]
    conversation_id = create_conversation(server, "throughput")
    conv_body = append_body(conversation_id, [message])
    conv_headers = {"Content-Type": "application/json", "Authorization": f"Bearer {server.token}"}
    floor_body = orjson.dumps({"conversation_id": "c1", "message": message})
    floor_headers = {"Content-Type": "application/json"}

    # Both endpoints must answer the body correctly before their speed means anything.
    server.timed(conv_body)
    probe = Client(floor.port)
    status, answer, _ = probe.post("/append", floor_body)
    probe.close()
    if status != 200 or "seq" not in orjson.loads(answer):
        raise RuntimeError(f"floor answered {status}: {answer!r}")

    def load_floor(seconds: float) -> dict[str, Any]:
        return _wrk(floor.process, floor.url, floor_body, floor_headers, seconds)

    def load_grouped(seconds: float) -> dict[str, Any]:
        return _wrk(floor.process, floor.grouped_url, floor_body, floor_headers, seconds)

    def load_convograph(seconds: float) -> dict[str, Any]:
        return _wrk(server.process, server.url, conv_body, conv_headers, seconds)

    warm = [load_floor(1), load_grouped(1), load_convograph(1)]
    floors, grouped, convs = [], [], []
    for _ in range(rounds):
        floors.append(load_floor(seconds))
        grouped.append(load_grouped(seconds))
        convs.append(load_convograph(seconds))

    # Every counted 2xx must be a stored message (wrk cannot read GraphQL userErrors).
    # Requests in flight when wrk stops are not counted but may still be stored.
    answered = 1 + warm[2]["requests"] + sum(r["requests"] for r in convs)
    stored = message_count(server, conversation_id)
    if not answered <= stored <= answered + 16 * (rounds + 1):
        raise RuntimeError(f"wrk counted {answered} appends but {stored} messages are stored")

    ratios = [
        c["requests_per_sec"] / f["requests_per_sec"] for f, c in zip(floors, convs, strict=True)
    ]
    ratio = round(median(ratios), 3)
    grouped_ratios = [
        g["requests_per_sec"] / f["requests_per_sec"] for f, g in zip(floors, grouped, strict=True)
    ]
    versus_grouped = [
        c["requests_per_sec"] / g["requests_per_sec"] for g, c in zip(grouped, convs, strict=True)
    ]
    floor_rps = median([f["requests_per_sec"] for f in floors])
    grouped_rps = median([g["requests_per_sec"] for g in grouped])
    conv_rps = median([c["requests_per_sec"] for c in convs])
    conv_p50 = median([c["latency_ms"]["p50"] for c in convs])
    conv_cpu = median([c["server_cpu_ms_per_request"] for c in convs])
    floor_cpu = median([f["server_cpu_ms_per_request"] for f in floors])
    return Figure(
        name="append_throughput_ratio",
        value=ratio,
        target=f">= {TARGET}",
        met=ratio >= TARGET,
        detail=(
            f"convograph {conv_rps:.0f} req/s vs floor {floor_rps:.0f} req/s "
            f"(medians of {rounds} alternating {seconds:g}s wrk -t2 -c16 rounds, one "
            f"conversation; convograph p50 {conv_p50:.1f} ms; server CPU per request "
            f"{conv_cpu:.2f} ms vs {floor_cpu:.2f} ms); group-commit floor {grouped_rps:.0f} "
            f"req/s = {median(grouped_ratios):.2f}x the floor, convograph "
            f"{median(versus_grouped):.3f}x it"
        ),
        data={
            "ratios": [round(r, 4) for r in ratios],
            "grouped_floor_ratios": [round(r, 4) for r in grouped_ratios],
            "ratios_to_grouped_floor": [round(r, 4) for r in versus_grouped],
            "floor": floors,
            "grouped_floor": grouped,
            "convograph": convs,
            "stored_messages": stored,
            "counted_responses": answered,
        },
    )
