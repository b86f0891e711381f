"""Containment on the hosts: who an activity ran as, its limits, its usage, an OOM kill; hosts' containment.

Revision ID: 0003
Revises: 0002
"""
from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass  # filled in by the containment work (issue 17)


def downgrade() -> None:
    pass
