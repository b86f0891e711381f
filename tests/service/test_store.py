"""The store's schema: Alembic's head is the revision the master checks for, and a fresh
database gets it on both SQLite and PostgreSQL."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from apportion.service.store.db import HEAD, MIGRATIONS, alembic_config, current_revision, make_engine, upgrade
from apportion.service.store.models import Base


def test_head_is_alembics_head():
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    assert script.get_current_head() == HEAD
    assert (MIGRATIONS / "versions").is_dir()


def test_upgrade_makes_every_table(db_url):
    engine = make_engine(db_url)
    assert current_revision(engine) is None
    upgrade(engine)
    assert current_revision(engine) == HEAD
    upgrade(engine)  # again: nothing to do
    from sqlalchemy import inspect

    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    engine.dispose()
