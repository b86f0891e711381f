from __future__ import annotations

import pytest

from tests.service.live import postgres_url, reap


@pytest.fixture(autouse=True, scope="module")
def _reap_processes():
    yield
    reap()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path) -> str:
    """Each end-to-end test runs on both stores: an SQLite file, and a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'apportion.db'}"
    else:
        yield from postgres_url()


@pytest.fixture
def pg_url() -> str:
    yield from postgres_url()
