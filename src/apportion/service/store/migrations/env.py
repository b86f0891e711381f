"""Alembic's entry point for apportion's store. The master runs the migrations itself
on start (``Store.upgrade``); an operator can also run them with the alembic command
(docs/service.md, "Schema upgrades")."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from apportion.service.store.models import Base

config = context.config
connection = config.attributes.get("connection")
if context.is_offline_mode():  # `apportion server upgrade --sql`: print the SQL, touch nothing
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=Base.metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
elif connection is not None:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    url = config.get_main_option("sqlalchemy.url")
    with create_engine(url).connect() as conn:
        context.configure(connection=conn, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
