"""The keyed digests are stored (token, owner, lock and session digests): a digest computed
by a new release must equal the one an earlier release stored, or every token and lock
stored before it stops matching."""

from __future__ import annotations

import pytest

from graph.store.keyring import Keyring

# Computed with the release that first stored them (HMAC-SHA256 under a key derived from
# the secret, of the purpose, a NUL and the value's UTF-8 with surrogates passed through).
KNOWN = [
    (
        "token",
        "cg_example-token",
        "ab54578515fc3bc02c5b9936e1adbb43e063283a7ac90f6322a05a17903cd1bb",
    ),
    ("owner", "user:42", "af65817cc8b23b5b333371cceafdd51ba490f3fe29366cd0d3e91c3163ee3edc"),
    ("lock", "l\u00e9\ud800", "9fffe2185db29038268ada69517196d670d5d7b091c7ddb7226739aca039c75b"),
]


@pytest.mark.parametrize(("purpose", "value", "stored"), KNOWN)
def test_digests_match_what_earlier_releases_stored(purpose: str, value: str, stored: str) -> None:
    assert Keyring(b"0" * 32).digest(purpose, value) == stored


def test_a_digest_depends_on_the_secret_and_the_purpose() -> None:
    one, other = Keyring(b"0" * 32), Keyring(b"1" * 32)
    assert one.token_digest("t") != other.token_digest("t")
    assert one.digest("token", "t") != one.digest("owner", "t")
    assert one.token_digest("t") == one.digest("token", "t")
