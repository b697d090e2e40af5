"""Disk (issue 13, item 1): what compressing the stored JSON gives, and what it costs.

    python -m bench.compression [--messages 10240] [--rounds 5]
    python -m bench.compression --app [--rounds 200]

The disk bench's messages (bench/disk.py: the same vocabulary and seed), encoded as the
store encodes them, compressed one by one (a message row's value) and in blocks of
`graph.domain.chunks.SIZE` joined as the sealed blocks pack them (domain/chunks.py). For
each codec and layout: the compressed bytes over the JSON bytes, and the time to get back
the texts of a transcript of `--messages` messages (median of `--rounds`), which item 2
bounds at 25 ms for 10,000 messages read whole. zlib is Python's own; zstd alone, and with a
dictionary trained on other messages of the same kind (what the store does,
store/compression.py).

With `--app`: the real app in this process (bench/inprocess.py) twice, side by side, its
default settings and CONVOGRAPH_SQLITE_COMPRESSION=false, each on a database that has
trained its dictionary (1,000 messages first): the median of `--rounds` appends of one
message, alternating between the two, and of reads of the `transcript` of a conversation
of 10,000 messages (stored compressed by the first, as text by the second).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zstandard

from graph.domain import chunks
from graph.domain.messages import prepare_messages
from graph.store.dictionary_training import train

from .disk import conversations
from .inprocess import App, app_client

Codec = tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]


def codecs(count: int) -> dict[str, Codec]:
    """The codecs measured; the dictionary is learnt from 1,000 messages that follow the
    `count` measured, as the store learns one from the messages before those it compresses."""
    trained = zstandard.ZstdCompressionDict(
        train(texts(count + 1000)[count:], ident=1) or b"",
        dict_type=zstandard.DICT_TYPE_FULLDICT,
    )
    return {
        "zlib 6": (lambda b: zlib.compress(b, 6), zlib.decompress),
        "zstd 3": (
            zstandard.ZstdCompressor(level=3).compress,
            zstandard.ZstdDecompressor().decompress,
        ),
        "zstd 3, a dictionary": (
            zstandard.ZstdCompressor(level=3, dict_data=trained).compress,
            zstandard.ZstdDecompressor(dict_data=trained).decompress,
        ),
    }


def texts(count: int) -> list[str]:
    out: list[str] = []
    for batch in conversations(count // 26 + 1, 26):
        prepared = prepare_messages(batch, max_count=len(batch), max_bytes=1 << 20)
        out.extend(m.text for m in prepared)
    return out[:count]


def measure(values: list[str], codec: Codec, *, block: int, rounds: int) -> tuple[float, float]:
    """(compressed ÷ JSON bytes, median ms to read all the texts back)."""
    compress, decompress = codec
    if block == 1:
        stored = [compress(v.encode()) for v in values]
    else:
        stored = [
            compress(chunks.pack(values[i : i + block]).encode())
            for i in range(0, len(values), block)
        ]
    took = []
    for _ in range(rounds):
        started = time.perf_counter()
        if block == 1:
            back = [decompress(s).decode() for s in stored]
        else:
            back = [t for s in stored for t in chunks.unpack(decompress(s).decode())]
        took.append(time.perf_counter() - started)
        assert back == values
    ratio = sum(map(len, stored)) / sum(len(v.encode()) for v in values)
    return ratio, statistics.median(took) * 1000


APPEND = """mutation($id: ID!, $m: [JSON!]!) { appendMessages(input: {conversationId: $id,
  messages: $m}) { userErrors { code } } }"""
CREATE = """mutation { createConversation(input: {title: "c"}) { conversation { id } } }"""
TRANSCRIPT = "query($id: ID!) { conversation(id: $id) { transcript } }"


async def _filled(app: App, messages: list[Any]) -> str:
    """A new conversation holding `messages` (appended 1,000 at a time); its id."""
    cid = str((await app.gql(CREATE))["createConversation"]["conversation"]["id"])
    for i in range(0, len(messages), 1000):
        await app.gql(APPEND, {"id": cid, "m": messages[i : i + 1000]})
    return cid


async def _trained(app: App, messages: list[Any]) -> None:
    """Messages written until the app has its dictionary (when it compresses at all)."""
    await _filled(app, messages[:1000])
    compression = app.services.db.compression
    for _ in range(100):
        if compression is None or not compression.enabled or compression.compressing:
            return
        await _filled(app, messages[:1])  # a write: a check follows it
        await asyncio.sleep(0.3)


async def _timed(app: App, query: str, variables: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = await app.post(query, variables)
    took = time.perf_counter() - started
    assert response.status_code == 200 and "errors" not in response.json()
    return took


async def side_by_side(rounds: int) -> None:
    messages = [m for batch in conversations(11_500 // 26 + 1, 26) for m in batch]
    with tempfile.TemporaryDirectory() as on_dir, tempfile.TemporaryDirectory() as off_dir:
        async with (
            app_client(Path(on_dir)) as on,
            app_client(Path(off_dir), sqlite_compression=False) as off,
        ):
            apps = {"compressed (default)": on, "text (compression off)": off}
            big = {}
            for name, app in apps.items():
                await _trained(app, messages)
                big[name] = await _filled(app, messages[1000:11_000])
            appends: dict[str, list[float]] = {name: [] for name in apps}
            reads: dict[str, list[float]] = {name: [] for name in apps}
            target = {name: await _filled(app, messages[:1]) for name, app in apps.items()}
            for i in range(rounds):
                for name, app in apps.items():
                    one = {"id": target[name], "m": [messages[11_000 + i % 400]]}
                    appends[name].append(await _timed(app, APPEND, one))
                    if i % 10 == 0:
                        reads[name].append(await _timed(app, TRANSCRIPT, {"id": big[name]}))
    for name in apps:
        print(
            f"  {name}: an append {statistics.median(appends[name]) * 1000:.3f} ms, "
            f"a transcript of 10,000 {statistics.median(reads[name]) * 1000:.1f} ms (medians)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=10_240)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--app", action="store_true", help="the app, compression on and off")
    args = parser.parse_args()
    if args.app:
        asyncio.run(side_by_side(args.rounds or 200))
        return
    values = texts(args.messages)
    print(f"{len(values):,} messages, {sum(len(v.encode()) for v in values) / 1e6:.1f} MB of JSON")
    for name, codec in codecs(len(values)).items():
        for block in (1, chunks.SIZE):
            ratio, ms = measure(values, codec, block=block, rounds=args.rounds or 5)
            layout = "each message" if block == 1 else f"blocks of {block}"
            print(f"  {name}, {layout}: {ratio:.3f} of the JSON; all read back in {ms:.1f} ms")


if __name__ == "__main__":
    main()
