"""A GraphQL POST written by hand on a raw connection, for tests of what a client library
would not do: trickle a body, stop halfway, keep a connection idle, send headers in pieces."""

from __future__ import annotations


def graphql_post_head(token: str, length: int, *, close: bool = False) -> bytes:
    """The request line and headers of `POST /graphql` with a JSON body of `length` bytes,
    authorized by `token`; `close` asks the server to close the connection after it."""
    connection = "Connection: close\r\n" if close else ""
    return (
        f"POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\n{connection}"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()
