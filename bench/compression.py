"""Disk (issue 13, item 1), what compressing the stored JSON would give, before building it.

    python -m bench.compression [--messages 10240] [--rounds 5]

The disk bench's messages (bench/disk.py: the same vocabulary and seed), encoded as the
store encodes them, compressed one by one (a message row's value) and in blocks of
`graph.domain.chunks.SIZE` joined as the sealed blocks pack them (domain/chunks.py). For
each codec and layout: the compressed bytes over the JSON bytes, and the time to get back
the texts of a transcript of `--messages` messages (median of `--rounds`), which item 2
bounds at 25 ms for 10,000 messages read whole. zlib is Python's own; zstd is measured if
the `zstandard` package is installed (it is not a dependency).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
import zlib
from collections.abc import Callable

from graph.domain import chunks
from graph.domain.messages import prepare_messages

from .disk import conversations

Codec = tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]


def codecs() -> dict[str, Codec]:
    found: dict[str, Codec] = {"zlib 6": (lambda b: zlib.compress(b, 6), zlib.decompress)}
    try:
        zstandard = importlib.import_module("zstandard")
    except ImportError:
        return found
    found["zstd 3"] = (
        zstandard.ZstdCompressor(level=3).compress,
        zstandard.ZstdDecompressor().decompress,
    )
    return found


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--messages", type=int, default=10_240)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    values = texts(args.messages)
    print(f"{len(values):,} messages, {sum(len(v.encode()) for v in values) / 1e6:.1f} MB of JSON")
    for name, codec in codecs().items():
        for block in (1, chunks.SIZE):
            ratio, ms = measure(values, codec, block=block, rounds=args.rounds)
            layout = "each message" if block == 1 else f"blocks of {block}"
            print(f"  {name}, {layout}: {ratio:.3f} of the JSON; all read back in {ms:.1f} ms")


if __name__ == "__main__":
    main()
