"""The head revision /readyz compares the database with is the one Alembic finds."""

from alembic.config import Config
from alembic.script import ScriptDirectory

from graph.store.migrate import MIGRATIONS_DIR, head_revisions
from graph.store.migration_state import HEAD_REVISIONS, REVISIONS


def test_the_head_revision_is_alembics() -> None:
    assert head_revisions() == HEAD_REVISIONS


def test_the_known_revisions_are_alembics() -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    scripts = ScriptDirectory.from_config(config).walk_revisions()
    assert frozenset(s.revision for s in scripts) == REVISIONS
