"""DUCC on the live master: jobs, their work items, shares, cycles; process tokens.

Revision ID: 0002
Revises: 0001
"""
from alembic import op
import sqlalchemy as sa

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tokens") as t:
        t.add_column(sa.Column("job", sa.Integer(), nullable=True))
        t.add_column(sa.Column("share", sa.Integer(), nullable=True))
        t.create_index("ix_tokens_share", ["share"])
    with op.batch_alter_table("activities") as t:
        t.add_column(sa.Column("job", sa.Integer(), nullable=True))
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("user", sa.String(length=200), nullable=False),
        sa.Column("cls", sa.String(length=200), nullable=False),
        sa.Column("memory", sa.Float(), nullable=False),
        sa.Column("max_processes", sa.Integer(), nullable=True),
        sa.Column("threads", sa.Integer(), nullable=False),
        sa.Column("argv", sa.JSON(), nullable=False),
        sa.Column("env", sa.JSON(), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=True),
        sa.Column("client", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("submitted_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("init_seconds", sa.Float(), nullable=True),
        sa.Column("seconds_per_item", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "job_items",
        sa.Column("job", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("item", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("share", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("job", "idx"),
    )
    op.create_table(
        "shares",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("job", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=False),
        sa.Column("order", sa.Integer(), nullable=False),
        sa.Column("activity", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("initialized_at", sa.Float(), nullable=True),
        sa.Column("evicted", sa.String(length=32), nullable=True),
        sa.Column("cycle", sa.Integer(), nullable=False),
        sa.Column("gone_cycle", sa.Integer(), nullable=True),
        sa.Column("gone_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_shares_job", "shares", ["job"])
    op.create_table(
        "cycles",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("cycles")
    op.drop_index("ix_shares_job", table_name="shares")
    op.drop_table("shares")
    op.drop_table("job_items")
    op.drop_table("jobs")
    with op.batch_alter_table("activities") as t:
        t.drop_column("job")
    with op.batch_alter_table("tokens") as t:
        t.drop_index("ix_tokens_share")
        t.drop_column("share")
        t.drop_column("job")
