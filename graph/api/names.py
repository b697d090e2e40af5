"""GraphQL names of Python names (camelCase), converted once per name.

Strawberry converts the name of every argument of a field each time it resolves that
field (`convert_arguments`): a list of 50 conversations asking for `messages(last: 1)` and
`delegations(first: 10)` converts some 350 names per query. The names come from the
schema's own definitions, never from a request, so a plain dict holds them all.
"""

from __future__ import annotations

from strawberry.schema.name_converter import NameConverter


class CachedNames(NameConverter):
    """Strawberry's NameConverter (`StrawberryConfig(name_converter=...)`), memoised."""

    def __init__(self, auto_camel_case: bool = True) -> None:
        super().__init__(auto_camel_case)
        self._names: dict[str, str] = {}

    def apply_naming_config(self, name: str) -> str:
        found = self._names.get(name)
        if found is None:
            found = self._names[name] = super().apply_naming_config(name)
        return found
