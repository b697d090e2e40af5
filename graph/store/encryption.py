"""Encryption at rest: envelope encryption with AES-GCM, blind search, crypto-shredding.

On when a master key is set (CONVOGRAPH_ENCRYPTION_KEY or CONVOGRAPH_ENCRYPTION_KEY_FILE).
Each conversation, and each checkpoint session, has a random data key of its own; the key
store (store/key_store.py) keeps it wrapped (AES-GCM) under the master key, apart from the
data. Deleting a conversation deletes its key, so that an older copy of the data cannot be
read any more (crypto-shredding).

A sealed value names the key that sealed it: `cvg1:<ref>:<base64(nonce, ciphertext)>`, the
ref also authenticated (AES-GCM's associated data), so that a value moved to another row
still opens only under its own key. Reading therefore needs no knowledge of tables:
`Sql.rows` hands every result to `open_rows`, which opens the sealed values of the content
columns; a row whose key is gone (a deleted conversation in a restored copy) is left out of
a SELECT's result, as if deleted, with a log line.

Search: the full-text index holds keyed digests of the words (a blind index), never the
words; a search digests its words the same way. The blind-index key and the key of the
transcript digests are data keys too (ref `!index`): rotating the master key re-wraps them
and changes neither.
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
import hashlib
import hmac
import logging
import os
import re
import unicodedata
from binascii import a2b_base64, b2a_base64
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sqlalchemy import inspect, select

from graph.domain import ids
from graph.domain.errors import not_found
from graph.settings import Settings, master_key_bytes
from graph.store.key_store import TOMBSTONE, KeyStore, StoredKey, key_store
from graph.store.tables import conversation as C
from graph.store.tables import delegation as D
from graph.store.tables import message as M
from graph.store.tables import session_state as SS
from graph.store.tables import snapshot as S

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.engine import Dialect
    from sqlalchemy.ext.asyncio import AsyncEngine

logger = logging.getLogger("convograph.encryption")

PREFIX = "cvg1:"
# On SQLite a sealed value is stored as bytes (a BLOB in its text column): the same layout
# with the nonce and ciphertext raw, a quarter smaller than base64 and nothing to decode.
BINARY_PREFIX = PREFIX.encode()
INDEX_REF = "!index"
CONVERSATION = "c"
SESSION = "s"
# The result columns whose values may be sealed (by their key in a result).
SEALED_COLUMNS = frozenset(
    {"title", "metadata", "meta", "data", "messages", "state", "task", "summary", "payload"}
)
_WRAP_CONTEXT = b"convograph/data-key/"
# Letters only: a digest must be one word to FTS5's tokenizer and to PostgreSQL's parser.
_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")
_WORDS_KEPT = 200_000
# Characters of opened texts kept by Encryption._remember, over all keys.
_OPENED_KEPT = 32 * 1024 * 1024
# The base64 of a sealed value's 12-byte nonce: its first 16 characters.
_NONCE_CHARS = 16
# A word of a search that has no letter or digit: matches nothing, as without encryption.
_NO_WORD = "\x00"


class Lost(enum.Enum):
    """What `open_rows` does with a row holding a value it cannot open (its key is gone)."""

    DROP = "drop"  # leave it out: it reads as deleted
    KEEP = "keep"  # keep it sealed
    REFUSE = "refuse"  # raise NOT_FOUND: what is deleted cannot be written either


class EncryptionError(RuntimeError):
    """Encryption cannot start as set up; the message names the setting to fix."""


class MasterKeyRefused(EncryptionError):
    """The master key given does not open the key store as it is now. Found at start, it
    stops the process; found later (the key store was away at start, or rotated since), it
    makes the server unavailable (503, and not ready), never a request's fault: the server
    needs restarting with the right key."""


class MasterKeyRotated(MasterKeyRefused):
    """The key store was rotated (`convograph keys rotate`) to a master key this process
    was not given: it cannot open the keys wrapped again, nor make new ones under the
    retired key."""


def generate_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def _hkdf(secret: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)


class MasterKey:
    """Wraps and unwraps data keys; its id (a digest of the key) is stored with each one."""

    def __init__(self, raw: bytes, *, setting: str) -> None:
        self.id = hmac.new(raw, b"convograph/master-key-id", hashlib.sha256).hexdigest()[:16]
        self.setting = setting
        self._aead = AESGCM(_hkdf(raw, b"convograph/wrap-data-keys"))

    def wrap(self, ref: str, data_key: bytes) -> StoredKey:
        nonce = os.urandom(12)
        sealed = self._aead.encrypt(nonce, data_key, _WRAP_CONTEXT + ref.encode())
        return StoredKey(ref, self.id, base64.b64encode(nonce + sealed).decode())

    def unwrap(self, stored: StoredKey) -> bytes:
        raw = base64.b64decode(stored.wrapped)
        try:
            return self._aead.decrypt(raw[:12], raw[12:], _WRAP_CONTEXT + stored.ref.encode())
        except InvalidTag:
            raise EncryptionError(
                f"the data key {stored.ref} does not open under the master key of {self.setting}"
            ) from None


_WORD = re.compile(r"[^\W_]+")


def blind_words(text: str) -> list[str]:
    """The words of `text` as the blind index digests them: runs of letters and digits, case
    folded fully and compatibility forms decomposed (`ß` is `ss`, `ﬁ` is `fi`), accents
    removed. Kept as the digests already stored were made: SQLite's and PostgreSQL's plain
    indexes keep those forms (domain/words.py)."""
    if text.isascii():  # nothing to fold or strip but case: the common text, kept cheap
        return _WORD.findall(text.lower())
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return _WORD.findall(plain)


class BlindIndex:
    """Keyed digests of words: equal words give equal digests, and nothing else is learnt."""

    def __init__(self, key: bytes) -> None:
        self._key = _hkdf(key, b"convograph/blind-index")
        self._digest_key = _hkdf(key, b"convograph/content-digest")
        self._ref_key = _hkdf(key, b"convograph/session-ref")
        # Words repeat: most of a message's are digested already.
        self._words: dict[str, str] = {}

    def word(self, word: str) -> str:
        found = self._words.get(word)
        if found is None:
            mac = hmac.digest(self._key, word.encode("utf-8", "surrogatepass"), "sha256")
            found = mac[:10].hex().translate(_LETTERS)
            if len(self._words) >= _WORDS_KEPT:
                self._words.clear()
            self._words[word] = found
        return found

    def index_text(self, search_text: str | None) -> str | None:
        """What the index stores for a message's search text: its words' digests, each
        once, in digest order (no order or count of words is kept)."""
        if search_text is None:
            return None
        digests = sorted({self.word(w) for w in blind_words(search_text)})
        return " ".join(digests) or None

    def query(self, given: Sequence[str]) -> list[str]:
        """The digests a search of `given` words looks for (every one must be there)."""
        out: list[str] = []
        for word in given:
            found = blind_words(word) or [_NO_WORD]
            out.extend(self.word(w) for w in found)
        return list(dict.fromkeys(out))

    def content_digest(self, digest: str) -> str:
        """A transcript digest keyed, so that the stored one cannot confirm a guessed text."""
        return "k" + hmac.digest(self._digest_key, digest.encode(), "sha256")[:16].hex()

    def session_ref(self, owner: Mapping[str, Any], session_id: str, generation: int = 0) -> str:
        """The ref of a session's data key. `generation` is the session's version floor
        (the last version it had when it was last deleted): each delete destroys the key of
        the generation it ends, and the checkpoints after it are sealed with a new one, so
        that no replica can seal a new checkpoint with a key it still holds in memory after
        another destroyed it. Generation 0 has the ref of the releases before generations."""
        parts: tuple[str, ...] = (
            owner["workspace_type"],
            owner["workspace_id"],
            str(getattr(owner["owner_type"], "value", owner["owner_type"])),
            owner["owner_digest"],
            session_id,
        )
        if generation:
            parts = (*parts, str(generation))
        mac = hmac.new(self._ref_key, "\0".join(parts).encode(), hashlib.sha256)
        return SESSION + mac.hexdigest()[:32]


_REF_AT = len(PREFIX)


@functools.lru_cache(maxsize=256)
def _sealed_columns(keys: tuple[str, ...]) -> tuple[int, ...]:
    """The positions of the columns of a result (by their keys) that may hold sealed values."""
    return tuple(i for i, k in enumerate(keys) if k in SEALED_COLUMNS)


def conversation_ref(conversation_id: str) -> str:
    return CONVERSATION + conversation_id


Sealed = str | bytes


def _prefixed(value: object) -> bool:
    """Begins as a sealed value does: the cheap test the reads make first (see `is_sealed`)."""
    if isinstance(value, str):
        return value.startswith(PREFIX)
    return isinstance(value, bytes) and value.startswith(BINARY_PREFIX)


# A sealed value: the prefix, a ref this module makes (a conversation's, a session's or the
# index's), then at least a nonce and a tag (12 + 16 bytes: 38 characters of base64).
_REF_FORM = r"(?:c[0-9a-fA-F-]{36}|s[0-9a-f]{32}|!index):"
_SEALED_TEXT = re.compile(PREFIX + _REF_FORM + r"[A-Za-z0-9+/_-]{38,}={0,2}\Z")
_SEALED_BYTES = re.compile(PREFIX.encode() + _REF_FORM.encode() + rb".{28}", re.DOTALL)


def is_sealed(value: object) -> bool:
    """Whether `value` is in the form this module seals to. A text written without
    encryption that merely begins as one does ("cvg1: notes") is not: it is read as it is,
    and `keys encrypt-existing` seals it."""
    if isinstance(value, str):
        return _SEALED_TEXT.match(value) is not None
    return isinstance(value, bytes) and _SEALED_BYTES.match(value) is not None


def _ref_of(value: Sealed) -> str | None:
    if isinstance(value, bytes):
        end = value.find(b":", _REF_AT)
        return value[_REF_AT:end].decode() if end > 0 else None
    end = value.find(":", _REF_AT)
    return value[_REF_AT:end] if end > 0 else None


def load_master_keys(settings: Settings) -> tuple[MasterKey, MasterKey | None]:
    """The current master key and the previous one (while rotating), from the settings."""
    if settings.encryption_key is not None:
        current = MasterKey(
            master_key_bytes(settings.encryption_key), setting="CONVOGRAPH_ENCRYPTION_KEY"
        )
    elif settings.encryption_key_file is not None:
        current = _master_key_file(settings.encryption_key_file, "CONVOGRAPH_ENCRYPTION_KEY_FILE")
    else:
        raise EncryptionError("CONVOGRAPH_ENCRYPTION_KEY (or _KEY_FILE) is not set")
    previous = None
    if settings.encryption_previous_key is not None:
        previous = MasterKey(
            master_key_bytes(settings.encryption_previous_key),
            setting="CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY",
        )
    elif settings.encryption_previous_key_file is not None:
        previous = _master_key_file(
            settings.encryption_previous_key_file, "CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY_FILE"
        )
    return current, previous


def _master_key_file(name: str, setting: str) -> MasterKey:
    """The master key in the file `name` (a mounted secret); refused naming `setting`."""
    path = Path(name)
    try:
        given = path.read_text()
    except OSError as exc:
        raise EncryptionError(f"{setting}: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        # Raw bytes (`head -c 32 /dev/urandom`), not their base64: was a traceback.
        given = "\0"
    try:
        raw = master_key_bytes(given)
    except ValueError as exc:
        raise EncryptionError(f"{setting}: {path} {exc}") from None
    return MasterKey(raw, setting=setting)


class Encryption:
    """The process's master keys, key store and cache of opened data keys."""

    def __init__(
        self,
        current: MasterKey,
        previous: MasterKey | None,
        store: KeyStore,
        *,
        binary: bool = False,
    ) -> None:
        self.binary = binary
        self.current = current
        self.previous = previous
        self.store = store
        self._keys: dict[str, AESGCM] = {}
        self._index: BlindIndex | None = None
        self._shredded_logged: set[str] = set()
        # Texts opened (or sealed) lately, by data key: an agent reads its whole transcript
        # every turn, and each of its messages is opened once, not at every read. Dropped
        # with the key when it is destroyed.
        self._opened: dict[str, dict[Sealed, str]] = {}
        self._opened_bytes = 0
        # Why the master key was refused once this process was serving (see `refusal`).
        self._refused: str | None = None
        # Where the sweep's scan for keys without data goes on from (encryption_admin).
        self.orphan_scan_after = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> Encryption:
        current, previous = load_master_keys(settings)
        return cls(current, previous, key_store(settings), binary=settings.is_sqlite)

    @property
    def masters(self) -> dict[str, MasterKey]:
        out = {self.current.id: self.current}
        if self.previous is not None:
            out.setdefault(self.previous.id, self.previous)
        return out

    # -- start -------------------------------------------------------------

    async def ready(self) -> BlindIndex:
        """Check the master keys against the key store (once), and load the index key."""
        if self._index is not None:
            return self._index
        await self.store.open()
        await self.check_not_retired()
        counts = await self.store.counts()
        unknown = {k: n for k, n in counts.items() if k not in self.masters and k != TOMBSTONE}
        if unknown:
            raise self._refuse(
                MasterKeyRefused,
                f"{self.current.setting} is not the master key of the key store "
                f"({self.store.where}): {sum(unknown.values())} data keys are wrapped by "
                f"another master key (id {', '.join(sorted(unknown))}); set the master key "
                "they were written with (while rotating, the old one as "
                "CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY)",
            )
        index = await self._data_key(INDEX_REF, create=True)
        assert index is not None
        self._index = BlindIndex(index[1])
        return self._index

    async def check_not_retired(self) -> None:
        """Refuse a current master key that `keys rotate` rotated away from, given alone (a
        replica or a restart still set with the old key). Given with a previous key that is
        not retired too (nor itself), it is a rotation back to it: no longer retired."""
        successor = await self.store.successor(self.current.id)
        if successor is None:
            return
        if await self._no_rotation_back():
            raise self._rotated_away(successor)
        await self.store.unretire(self.current.id)

    async def _no_rotation_back(self) -> bool:
        """Whether the keys given are not a rotation back to the current one (once retired):
        it is given alone, as its own previous key, or with a previous key retired too."""
        previous = self.previous
        return (
            previous is None
            or previous.id == self.current.id
            or await self.store.successor(previous.id) is not None
        )

    def _rotated_away(self, successor: str | None) -> MasterKeyRefused:
        """The refusal of a current master key `keys rotate` rotated away from."""
        return self._refuse(
            MasterKeyRotated,
            f"{self.current.setting}: the key store ({self.store.where}) was rotated to "
            f"another master key (id {successor}) by `convograph keys rotate`, away from "
            f"this one (id {self.current.id}): set {self.current.setting} to the new "
            "master key",
        )

    def _refuse(self, kind: type[MasterKeyRefused], message: str) -> MasterKeyRefused:
        """The refusal to raise, remembered for `refusal` (the request that meets it logs
        it; a start stops on it)."""
        self._refused = message
        return kind(message)

    async def refusal(self) -> str | None:
        """Why this process cannot serve with its master key (for /readyz), or None: refused
        since it started, or rotated away from meanwhile (asked of the key store, which a
        probe reads and never writes). Also with a previous key set, unless a rotation back:
        one kept from an earlier rotation is retired too, and left the replica in rotation."""
        if self._refused is None:
            successor = await self.store.successor(self.current.id)
            if successor is not None and await self._no_rotation_back():
                refused = self._rotated_away(successor)
                logger.error("%s; not ready until restarted with it", refused)
        return self._refused

    @property
    def index(self) -> BlindIndex:
        assert self._index is not None, "Encryption.ready() first"
        return self._index

    async def close(self) -> None:
        await self.store.close()

    # -- keys --------------------------------------------------------------

    def _unwrap(self, stored: StoredKey) -> bytes:
        master = self.masters.get(stored.key_id)
        if master is None:
            # Checked at start (`ready`): another process wrapped it since, `keys rotate`.
            raise self._refuse(
                MasterKeyRotated,
                f"the data key {stored.ref} is wrapped by master key {stored.key_id}, which is "
                f"neither {self.current.setting} nor CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY: the key "
                "store was rotated to another master key (`convograph keys rotate`) since this "
                f"server started; restart it with the new master key as {self.current.setting}",
            )
        return master.unwrap(stored)

    async def _data_key(self, ref: str, *, create: bool) -> tuple[AESGCM, bytes] | None:
        found = (await self.store.get_many([ref])).get(ref)
        if found is None:
            if not create:
                return None
            # Stored (and committed) before anything it seals can commit.
            found = await self.store.add(self.current.wrap(ref, os.urandom(32)))
            if found is None:  # rotated away from since this process started
                raise self._rotated_away(await self.store.successor(self.current.id))
        if found.key_id == TOMBSTONE:
            # A deleted conversation (in a restored copy): no new key, no write.
            raise not_found("conversation", "id")
        raw = self._unwrap(found)
        return AESGCM(raw), raw

    async def key(self, ref: str) -> AESGCM:
        """The data key of `ref`, made and stored first if it has none."""
        aead = self._keys.get(ref)
        if aead is None:
            await self.ready()
            made = await self._data_key(ref, create=True)
            assert made is not None
            aead = self._keys[ref] = made[0]
        return aead

    async def _load(self, refs: Iterable[str]) -> None:
        missing = [r for r in set(refs) if r not in self._keys]
        if not missing:
            return
        await self.ready()
        for ref, stored in (await self.store.get_many(missing)).items():
            if stored.key_id != TOMBSTONE:
                self._keys[ref] = AESGCM(self._unwrap(stored))

    async def forget(self, refs: Sequence[str]) -> None:
        """Destroy data keys (after the delete of what they sealed has committed): a
        conversation's leaves a tombstone (its id is never used again), a session's goes
        (a session id may start again)."""
        if not refs:
            return
        for ref in refs:
            self._keys.pop(ref, None)
            self._opened.pop(ref, None)
        conversations = [r for r in refs if r.startswith(CONVERSATION)]
        if conversations:
            await self.store.shred(conversations)
        others = [r for r in refs if not r.startswith(CONVERSATION)]
        if others:
            await self.store.delete(others)

    # -- sealing -----------------------------------------------------------

    def _seal_with(self, aead: AESGCM, ref: str, value: str) -> Sealed:
        nonce = os.urandom(12)
        sealed = aead.encrypt(nonce, value.encode("utf-8", "surrogatepass"), ref.encode())
        if self.binary:
            return b"".join((BINARY_PREFIX, ref.encode(), b":", nonce, sealed))
        return f"{PREFIX}{ref}:{b2a_base64(nonce + sealed, newline=False).decode()}"

    async def seal(self, ref: str, value: str) -> Sealed:
        return self._seal_with(await self.key(ref), ref, value)

    async def seal_values(
        self, ref: str, values: MutableMapping[str, Any], keys: Iterable[str]
    ) -> None:
        """Seal, in place, the string values of `keys` that `values` holds (every one: what
        is written is the caller's text, even one that begins as a sealed value does)."""
        aead: AESGCM | None = None
        for key in keys:
            value = values.get(key)
            if isinstance(value, str):
                aead = aead or await self.key(ref)
                values[key] = self._seal_with(aead, ref, value)

    async def sealed_messages(
        self, conversation_id: str, rows: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """Message rows as stored: the JSON sealed, the digest keyed, the search text as
        word digests (the rows given keep their values: they are what the caller returns)."""
        ref = conversation_ref(conversation_id)
        aead = await self.key(ref)
        index = self.index
        out = []
        at = len(ref) + _REF_AT + 1
        fresh: dict[Sealed, str] = {}
        for row in rows:
            sealed = self._seal_with(aead, ref, row["data"])
            # The next read of the transcript finds it opened already.
            fresh[sealed[at : at + self._nonce_length]] = row["data"]
            out.append(
                {
                    **row,
                    "data": sealed,
                    "digest": index.content_digest(row["digest"]),
                    "search_text": index.index_text(row["search_text"]),
                }
            )
        self._remember(ref, fresh)
        return out

    def _remember(self, ref: str, fresh: Mapping[Sealed, str]) -> None:
        """Keep texts opened from values sealed under the key of `ref`, by their nonces. A
        nonce names its value: random, never used twice under one key (AES-GCM's own
        requirement)."""
        if not fresh:
            return
        size = sum(map(len, fresh.values())) + 64 * len(fresh)
        if self._opened_bytes + size > _OPENED_KEPT:
            self._opened.clear()
            self._opened_bytes = 0
        self._opened.setdefault(ref, {}).update(fresh)
        self._opened_bytes += size

    @property
    def _nonce_length(self) -> int:
        return 12 if self.binary else _NONCE_CHARS

    def open(self, value: Sealed) -> str | None:
        """The text sealed in `value`; None when its key is gone (deleted: crypto-shredded)
        or was never loaded."""
        ref = _ref_of(value)
        aead = self._keys.get(ref) if ref else None
        if aead is None or ref is None:
            return None
        at = _REF_AT + len(ref) + 1
        nonce = value[at : at + (12 if isinstance(value, bytes) else _NONCE_CHARS)]
        opened = self._opened.get(ref)
        if opened is not None and (plain := opened.get(nonce)) is not None:
            return plain
        try:
            raw = value[at:] if isinstance(value, bytes) else a2b_base64(value[at:])
            plain = aead.decrypt(raw[:12], raw[12:], ref.encode()).decode("utf-8", "surrogatepass")
        except (InvalidTag, binascii.Error):
            # Altered, or sealed under a key of this ref that was deleted (a restored copy
            # written to since): lost either way, never shown as garbage.
            if is_sealed(value):
                logger.error("a value sealed under data key %s fails authentication", ref)
            return None
        self._remember(ref, {nonce: plain})
        return plain

    async def open_rows(
        self, keys: tuple[str, ...], values: list[tuple[Any, ...]], *, lost: Lost
    ) -> list[tuple[Any, ...]]:
        """Result rows with their sealed values opened; `lost` says what becomes of a row
        holding a value whose key is gone."""
        columns = _sealed_columns(keys)
        if not columns or not values:
            return values
        if len(columns) == 1 and len(keys) == 1:
            # One text per row (a transcript's): the common read, in one pass.
            texts = self._remembered_column(values) or self._open_column(values)
            if texts is not None:
                return texts
        refs = {
            ref
            for row in values
            for i in columns
            if _prefixed(v := row[i]) and (ref := _ref_of(v)) is not None
        }
        if not refs:
            return values
        await self._load(refs)
        out: list[tuple[Any, ...]] = []
        for row in values:
            opened = list(row)
            missing = False
            for i in columns:
                value = row[i]
                if _prefixed(value):
                    plain = self.open(value)
                    if plain is None:
                        if not is_sealed(value):
                            continue  # a text that only begins as a sealed value does
                        missing = True
                        self._lost(value)
                        break
                    opened[i] = plain
            if missing:
                if lost is Lost.REFUSE:
                    raise not_found("record", "id")
                if lost is Lost.KEEP:
                    out.append(row)
                continue
            out.append(tuple(opened))
        return out

    def _remembered_column(self, values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
        """Single-column rows whose values were all opened lately under the key the first
        names, found by their nonces alone; None otherwise. An agent reads its whole
        transcript every turn: this is that read's cost, a lookup per message. (A value of
        another key has other nonces, random: it is not found, and the caller opens it.)"""
        first = values[0][0]
        if first.__class__ is not (bytes if self.binary else str) or not _prefixed(first):
            return None
        ref = _ref_of(first)
        if ref is None or ref not in self._keys:
            return None
        opened = self._opened.get(ref)
        if not opened:
            return None
        at = _REF_AT + len(ref) + 1
        end = at + self._nonce_length
        get = opened.get
        texts: list[tuple[Any, ...]] = []
        append = texts.append
        try:
            for (value,) in values:
                text = get(value[at:end])
                if text is None:  # not opened lately: the first read in a process stops here
                    return None
                append((text,))
        except TypeError:  # a NULL (or a number) among them
            return None
        return texts

    def _open_column(self, values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
        """Single-column rows opened with the keys already loaded; None when one needs a key
        not loaded yet (or cannot be opened), for the general path to deal with. Values are
        stored as bytes on SQLite (nonce and ciphertext raw), as base64 text on PostgreSQL."""
        binary = self.binary
        kind: type = bytes if binary else str
        prefix: Sealed = BINARY_PREFIX if binary else PREFIX
        colon: Sealed = b":" if binary else ":"
        width = self._nonce_length
        out: list[tuple[Any, ...]] = []
        append = out.append
        # `head` is the prefix and ref of the last value: the rows of a transcript share it.
        head: Any = b"\0" if binary else "\0"
        at, ref, aad, decrypt = 0, "", b"", None
        opened: dict[Sealed, str] = {}
        fresh: dict[Sealed, str] = {}
        try:
            for (value,) in values:
                cls = value.__class__  # (compared apart: mypy would narrow `value` to object)
                if cls is not kind:
                    append((value,))
                    continue
                if not value.startswith(head):
                    if not value.startswith(prefix):
                        append((value,))
                        continue
                    self._remember(ref, fresh)
                    fresh = {}
                    end = value.find(colon, _REF_AT)
                    name = value[_REF_AT:end]
                    ref = name.decode() if binary else name
                    aead = self._keys.get(ref)
                    if aead is None:
                        return None
                    head, at, aad, decrypt = value[: end + 1], end + 1, ref.encode(), aead.decrypt
                    opened = self._opened.get(ref) or {}
                nonce = value[at : at + width]
                plain = opened.get(nonce)
                if plain is None:
                    assert decrypt is not None
                    if binary:
                        sealed = decrypt(nonce, value[at + 12 :], aad)
                    else:
                        raw = a2b_base64(value[at:])
                        sealed = decrypt(raw[:12], raw[12:], aad)
                    plain = fresh[nonce] = sealed.decode("utf-8", "surrogatepass")
                append((plain,))
        except (InvalidTag, binascii.Error):
            return None
        self._remember(ref, fresh)
        return out

    def _lost(self, value: Sealed) -> None:
        ref = _ref_of(value) or "?"
        if ref in self._shredded_logged:
            return
        if len(self._shredded_logged) > 10_000:
            self._shredded_logged.clear()
        self._shredded_logged.add(ref)
        what = f"conversation {ref[1:]}" if ref.startswith(CONVERSATION) else f"session key {ref}"
        logger.warning(
            "%s cannot be decrypted: its data key is not in the key store (%s), so it was "
            "deleted (crypto-shredded); it reads as deleted",
            what,
            self.store.where,
        )


async def sealed_changes(
    encryption: Encryption, conversation_id: str, changes: Mapping[str, Any]
) -> dict[str, Any]:
    """A conversation's changes with its title and metadata sealed (an unknown id is left
    to the write, which says it is not found)."""
    out = dict(changes)
    cid = ids.canonical(conversation_id)
    if cid is not None:
        await encryption.seal_values(conversation_ref(cid), out, ("title", "metadata", "meta"))
    return out


async def seal_payloads(encryption: Encryption, rows: Sequence[MutableMapping[str, Any]]) -> None:
    """Seal, in place, event log rows' payloads (their messages, their delegation) under
    the key of the tree's root: the log goes with the root."""
    for row in rows:
        if row["payload"] is not None:
            row["payload"] = await encryption.seal(conversation_ref(row["root_id"]), row["payload"])


def opened_size(texts: Iterable[str]) -> int:
    """The UTF-8 bytes of opened texts (what the quotas count)."""
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


async def check_unencrypted(settings: Settings, *, engine: AsyncEngine | None = None) -> None:
    """With encryption off: refuse to start on a database whose key store holds keys, or
    whose newest content is sealed (a data backup restored without its key store): it would
    be served as garbage, not JSON. `engine`: the data's."""
    store = key_store(settings, engine=engine)
    try:
        if await store.exists():
            raise EncryptionError(
                f"the database's content is encrypted (its key store {store.where} holds data "
                "keys), but CONVOGRAPH_ENCRYPTION_KEY (or CONVOGRAPH_ENCRYPTION_KEY_FILE) is "
                "not set"
            )
        if engine is not None and await holds_sealed(engine):
            raise EncryptionError(
                "the database's content is encrypted (its newest records are sealed), but "
                "CONVOGRAPH_ENCRYPTION_KEY (or CONVOGRAPH_ENCRYPTION_KEY_FILE) is "
                f"not set, and no key store holds keys at {store.where}: restore the key store "
                "beside the data and set the master key"
            )
    finally:
        await store.close()


async def check_encrypted(encryption: Encryption, *, engine: AsyncEngine) -> None:
    """With encryption on: refuse to start on sealed content whose key store holds no keys (a
    mistyped CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE or schema, a store not restored beside the
    data), where a new, empty one would make every record read as deleted; then check the
    master keys against the store (`Encryption.ready`)."""
    await check_key_store_found(encryption, engine=engine)
    await encryption.ready()


async def check_key_store_found(encryption: Encryption, *, engine: AsyncEngine) -> None:
    """Refuse sealed content whose key store holds no keys where the settings say (see
    `check_encrypted`), before anything opens the store: opened, an empty one is made there."""
    if not await encryption.store.exists() and await holds_sealed(engine):
        raise EncryptionError(
            "the database's content is encrypted (its newest records are sealed), but its "
            f"key store holds no keys at {encryption.store.where}: set "
            "CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE (SQLite) or CONVOGRAPH_ENCRYPTION_KEY_SCHEMA "
            "(PostgreSQL) to where it is, or restore it beside the data"
        )


# What `holds_sealed` reads: the newest rows of the tables every encrypted database fills.
_PROBED = 20


async def holds_sealed(engine: AsyncEngine) -> bool:
    """Whether the newest values of a column that encryption seals are sealed (a few rows of
    each: messages, checkpoints, conversations' titles and metadata, which a conversation
    without messages holds alone, snapshots, delegations); not on a database not migrated
    yet (`serve --no-migrate` waits for it)."""
    async with engine.connect() as conn:
        if not await conn.run_sync(_probed_tables_exist):
            return False
        for probe in _probes(conn.dialect):
            found = await conn.exec_driver_sql(probe)
            if any(is_sealed(value) for (value,) in found):
                return True
    return False


# Each sealed column, and what orders its table's rows newest first.
_PROBES = (
    (M.c.data, M.c.id),
    (SS.c.state, SS.c.id),
    (C.c.title, C.c.updated_at),
    (C.c.metadata, C.c.updated_at),
    (S.c.messages, S.c.created_at),
    (D.c.task, D.c.created_at),
    (D.c.summary, D.c.created_at),
)


# Compiled once per process and dialect: every server start and command runs them on a new
# engine, whose own statement cache starts empty. Their values are read as the driver gives
# them (a sealed value is text or bytes as stored), with no column type's processing.
_PROBE_SQL: dict[str, tuple[str, ...]] = {}


def _probes(dialect: Dialect) -> tuple[str, ...]:
    found = _PROBE_SQL.get(dialect.name)
    if found is None:
        found = _PROBE_SQL[dialect.name] = tuple(
            str(
                select(column)
                .where(column.is_not(None))
                .order_by(newest.desc())
                .limit(_PROBED)
                .compile(dialect=dialect, compile_kwargs={"literal_binds": True})
            )
            for column, newest in _PROBES
        )
    return found


def _probed_tables_exist(connection: Connection) -> bool:
    tables = set(inspect(connection).get_table_names())  # one query, not one per table
    return all(column.table.name in tables for column, _ in _PROBES)
