"""History: one sample a minute of hosts, slots, allocations and demand for the
console's charts (service/history.py), kept for a day.

Revision ID: 0005
Revises: 0004
"""
from alembic import op
import sqlalchemy as sa

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "history",
        sa.Column("at", sa.Float(), primary_key=True, autoincrement=False),
        sa.Column("hosts_ok", sa.Integer(), nullable=False),
        sa.Column("hosts_down", sa.Integer(), nullable=False),
        sa.Column("hosts_closed", sa.Integer(), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("used", sa.Integer(), nullable=False),
        sa.Column("allocations", sa.Integer(), nullable=False),
        sa.Column("demand", sa.Integer(), nullable=False),
        sa.Column("reclaiming", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("history")
