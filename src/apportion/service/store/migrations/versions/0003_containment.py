"""Containment on the hosts: who an activity ran as, its limits, its usage, an OOM kill; hosts' containment.

Revision ID: 0003
Revises: 0002
"""
from alembic import op
import sqlalchemy as sa

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("activities") as t:
        t.add_column(sa.Column("user", sa.String(length=200), nullable=True))  # the account it ran as
        t.add_column(sa.Column("uid", sa.Integer(), nullable=True))
        t.add_column(sa.Column("oom", sa.Boolean(), nullable=False, server_default=sa.false()))
        t.add_column(sa.Column("limits", sa.JSON(), nullable=True))  # what the agent applied
        t.add_column(sa.Column("usage", sa.JSON(), nullable=True))  # the last (final) usage reported
        # an agent's reason (a refused user, an OOM kill) can be longer than the old 200
        t.alter_column("stop_reason", existing_type=sa.String(length=200), type_=sa.String(length=1000),
                       existing_nullable=True)
    with op.batch_alter_table("allocations") as t:
        t.add_column(sa.Column("memory", sa.Float(), nullable=True))  # GB per slot asked for, if any
    with op.batch_alter_table("hosts") as t:
        t.add_column(sa.Column("containment", sa.String(length=32), nullable=True))
        t.add_column(sa.Column("run_as", sa.JSON(), nullable=True))
        t.add_column(sa.Column("closed_reason", sa.String(length=1000), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hosts") as t:
        t.drop_column("closed_reason")
        t.drop_column("run_as")
        t.drop_column("containment")
    with op.batch_alter_table("allocations") as t:
        t.drop_column("memory")
    with op.batch_alter_table("activities") as t:
        t.alter_column("stop_reason", existing_type=sa.String(length=1000), type_=sa.String(length=200),
                       existing_nullable=True)
        t.drop_column("usage")
        t.drop_column("limits")
        t.drop_column("oom")
        t.drop_column("uid")
        t.drop_column("user")
