"""The live master (`apportion server`): the middle layer and the HTTP API around the engine.

- ``store/``: the durable state (SQLAlchemy 2, Alembic migrations; SQLite or PostgreSQL).
- ``master.py``: the one task that drives the engine, fed by a queue of events; it
  commits each cycle's decisions before anyone hears of them.
- ``published.py``: what has been committed, as the API reads it.
- ``api/``: the HTTP API (FastAPI), one module per resource; ``auth.py`` its tokens.
- ``leader.py``: which master serves (an advisory lock on PostgreSQL, a file lock on SQLite).
"""
