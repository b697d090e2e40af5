"""SQLite: messages stored compressed, with a dictionary trained on the database's own.

A message of a few hundred bytes compresses poorly alone (zstd keeps about 0.6 of it, with
the cost of a call per message either way); with a dictionary of what the database's
messages have in common (their keys, their roles, their frequent words), each one still
compresses alone, to about a third, and inflates alone in about a microsecond. So a message
stays one row and one value: a read of one message, a page, a search hit or a replace's
diff reads what it read before.

A message row's `data` is its JSON text, or a zstd frame (a BLOB that begins with zstd's
magic number) that names the dictionary it was compressed with (`message_dictionary.id`) and
the size of its text. Reads inflate the frames of any result column `data` (`Sql.rows`); SQL
that reads a message's JSON (the search index's view and its delete trigger, migration 0017)
calls `convograph_inflate`, registered on every connection (db.py). A dictionary is never
changed or deleted, so a frame stays readable as long as its row; one is trained once the
database holds enough messages (store/dictionary_training.py), and until then, or with
`CONVOGRAPH_SQLITE_COMPRESSION=false`, messages are stored as text. Not used on PostgreSQL
(TOAST compresses large values itself) nor with encryption on (a sealed value does not
compress).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import zstandard
from sqlalchemy import func

MAGIC = b"\x28\xb5\x2f\xfd"  # the first four bytes of every zstd frame
LEVEL = 3
FUNCTION = "convograph_inflate"
# A dictionary is worth keeping if it compresses messages to at most this much of what
# zstd makes of them alone (and of their JSON).
WORTH = 0.75
SAMPLE_EVERY = 64
WINDOW = 256


class DictionaryMissing(LookupError):
    """A frame names a dictionary the database does not hold."""


def _buffers(frames: list[bytes]) -> list[bytes | bytearray | memoryview]:
    return list(frames)


def _texts(found: zstandard.BufferWithSegmentsCollection) -> list[str]:
    return [found[i].tobytes().decode() for i in range(len(found))]


def is_frame(value: object) -> bool:
    return type(value) is bytes and value.startswith(MAGIC)


def is_frame_sql(column: str) -> str:
    """SQL that is true where `column` holds a frame."""
    return f"typeof({column}) = 'blob' AND substr({column}, 1, 4) = x'{MAGIC.hex().upper()}'"


def inflated(column: Any) -> Any:
    """SQL for `column`'s JSON text, a frame inflated (`convograph_inflate`)."""
    return getattr(func, FUNCTION)(column)


class Compression:
    """The dictionaries of one SQLite database, as this process knows them."""

    def __init__(self, path: Path | None, *, enabled: bool) -> None:
        self._path = path
        # Whether new messages are compressed (with encryption on they are sealed instead);
        # frames are inflated either way.
        self.enabled = enabled
        self._decompressors: dict[int, zstandard.ZstdDecompressor] = {}
        self._newest_id = 0
        self._newest: zstandard.ZstdDecompressor | None = None
        self._compressor: zstandard.ZstdCompressor | None = None
        # Messages this process has stored as text since it started (they wait for a
        # dictionary: store/dictionary_training.py).
        self.texts_stored = 0
        # Every SAMPLE_EVERY-th message compressed is also compressed without the
        # dictionary: the bytes of both over the last samples (`drifted`).
        self._plain = zstandard.ZstdCompressor(level=LEVEL)
        self._compressed = 0
        self._window = [0, 0, 0]  # samples, bytes with the dictionary, without

    @property
    def compressing(self) -> bool:
        """Whether new messages are stored compressed (a dictionary is known, and enabled)."""
        return self._compressor is not None

    @property
    def newest(self) -> int:
        """The id of the newest dictionary known (0: none)."""
        return self._newest_id

    def learn(self, dictionaries: Iterable[tuple[int, bytes]]) -> None:
        """Take the stored dictionaries (id, bytes); new messages use the newest."""
        for ident, data in sorted(dictionaries):
            if ident in self._decompressors:
                continue
            made = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
            self._decompressors[ident] = zstandard.ZstdDecompressor(dict_data=made)
            if ident < self._newest_id:
                continue
            self._newest_id = ident
            self._newest = self._decompressors[ident]
            self._window = [0, 0, 0]
            if self.enabled:
                made.precompute_compress(level=LEVEL)
                # A checksum (4 bytes a frame): a frame read with another dictionary than
                # its own (one that took its id after a downgrade, say) fails, never reads
                # as other text.
                self._compressor = zstandard.ZstdCompressor(
                    dict_data=made, write_checksum=True, write_content_size=True
                )

    def dropped(self, ident: int) -> None:
        """The database no longer holds dictionary `ident` (`keys encrypt-existing` dropped
        it, no message using it): new messages are not compressed with it."""
        if ident == self._newest_id:
            self._compressor = None

    def stored(self, text: str, encoded: bytes) -> str | bytes:
        """What a message row stores for the JSON `text` (`encoded` its UTF-8 bytes)."""
        compressor = self._compressor
        if compressor is None:
            return text
        frame = compressor.compress(encoded)
        self._compressed += 1
        if self._compressed % SAMPLE_EVERY == 0:
            window = self._window
            window[0] += 1
            window[1] += min(len(frame), len(encoded))
            window[2] += min(len(self._plain.compress(encoded)), len(encoded))
        return frame if len(frame) < len(encoded) else text

    def drifted(self) -> bool:
        """Whether, over the last `WINDOW` samples, the dictionary has kept more than `WORTH`
        of what zstd keeps without one (the messages no longer look like those it was
        learnt from); the samples start again either way."""
        samples, kept, plain = self._window
        if samples < WINDOW:
            return False
        self._window = [0, 0, 0]
        return kept > WORTH * plain

    def inflate(self, frame: bytes) -> str:
        """The JSON text of a stored frame."""
        newest = self._newest
        if newest is not None:
            try:
                return newest.decompress(frame).decode()
            except zstandard.ZstdError:
                pass  # another dictionary's frame
        return self._decompressor(frame).decompress(frame).decode()

    def _decompressor(self, frame: bytes) -> zstandard.ZstdDecompressor:
        """The decompressor of the dictionary `frame` names, read from the database if this
        process does not know it yet; DictionaryMissing if the database holds none."""
        ident = zstandard.get_frame_parameters(frame).dict_id
        found = self._decompressors.get(ident)
        if found is None:
            self.learn(self._read_dictionaries())
            found = self._decompressors.get(ident)
            if found is None:
                raise DictionaryMissing(f"no message dictionary {ident}")
        return found

    def inflate_value(self, value: Any) -> Any:
        """`value` with a frame inflated (SQL's `convograph_inflate`)."""
        return self.inflate(value) if is_frame(value) else value

    def register(self, connection: Any) -> None:
        """Give an SQLite connection `convograph_inflate`, which the search index's view
        and delete trigger call (a connection of convograph's, or one of a tool's own)."""
        connection.create_function(FUNCTION, 1, self.inflate_value, deterministic=True)

    def inflate_rows(self, keys: tuple[str, ...], values: list[tuple[Any, ...]]) -> list[Any]:
        """Result rows with the frames of their `data` column inflated (the same list when
        none holds one)."""
        at = keys.index("data")
        magic = MAGIC  # is_frame, inline: this runs once per row of every transcript read
        spots = [
            i for i, row in enumerate(values) if type(v := row[at]) is bytes and v.startswith(magic)
        ]
        if not spots:
            return values
        texts = self._inflate_many([values[i][at] for i in spots])
        if len(keys) == 1 and len(spots) == len(values):  # a transcript's texts
            return [(text,) for text in texts]
        out = list(values)
        for i, text in zip(spots, texts, strict=True):
            if len(keys) == 1:
                out[i] = (text,)
            else:
                changed = list(out[i])
                changed[at] = text
                out[i] = tuple(changed)
        return out

    def _inflate_many(self, frames: list[bytes]) -> list[str]:
        # A transcript's frames in one call per dictionary: zstd's own loop, not one call of
        # Python each.
        newest = self._newest
        if newest is not None and len(frames) > 1:
            try:
                return _texts(newest.multi_decompress_to_buffer(_buffers(frames)))
            except zstandard.ZstdError:
                pass  # another dictionary's frames among them
        if len(frames) < 2:
            return [self.inflate(frame) for frame in frames]
        by_dictionary: dict[int, list[int]] = {}
        for i, frame in enumerate(frames):
            ident = zstandard.get_frame_parameters(frame).dict_id
            by_dictionary.setdefault(ident, []).append(i)
        out = [""] * len(frames)
        for spots in by_dictionary.values():
            found = self._decompressor(frames[spots[0]]).multi_decompress_to_buffer(
                _buffers([frames[i] for i in spots])
            )
            for i, text in zip(spots, _texts(found), strict=True):
                out[i] = text
        return out

    def _read_dictionaries(self) -> list[tuple[int, bytes]]:
        """The stored dictionaries, read on a connection of its own: a frame written by
        another process (a server trained one after this one started) is met inside SQL
        (the search index's view) as well as in Python, and both wait on this only once."""
        if self._path is None:
            return []
        uri = f"{self._path.resolve().as_uri()}?mode=ro"
        connection = sqlite3.connect(uri, uri=True)
        try:
            return connection.execute("SELECT id, data FROM message_dictionary").fetchall()
        finally:
            connection.close()
