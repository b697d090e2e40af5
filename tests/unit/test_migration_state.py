"""The head revision /readyz compares the database with is the one Alembic finds."""

from graph.store.migrate import head_revisions
from graph.store.migration_state import HEAD_REVISIONS


def test_the_head_revision_is_alembics() -> None:
    assert head_revisions() == HEAD_REVISIONS
