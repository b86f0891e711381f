"""Rigid work live: how long an allocation's work runs once started (``walltime``, as its
client said) and when it first held its min (``started_at``). With both, a restarted master
gives the engine its book of ends back, and the planned starts of reservations are the same.

Revision ID: 0008
Revises: 0007
"""
from alembic import op
import sqlalchemy as sa

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("allocations") as t:
        t.add_column(sa.Column("walltime", sa.Float(), nullable=True))
        t.add_column(sa.Column("started_at", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("allocations") as t:
        t.drop_column("started_at")
        t.drop_column("walltime")
