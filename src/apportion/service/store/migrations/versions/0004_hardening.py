"""Hardening: a quarantine for stored rows the master can no longer accept, an
audit of every call that changes state, and per-host start failures.

Revision ID: 0004
Revises: 0003
"""
from alembic import op
import sqlalchemy as sa

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quarantine",  # rows set aside at start: the master serves the rest (docs/service.md, "Quarantine")
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("table", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("row", sa.Text(), nullable=False),  # the row as JSON text, as it was stored
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
    )
    op.create_table(
        "audit",  # every call that changes state, written with the change (docs/service.md, "Audit")
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("token", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=True),
        sa.Column("consumer", sa.String(length=400), nullable=True),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("path", sa.String(length=400), nullable=False),
        sa.Column("objects", sa.JSON(), nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=1000), nullable=False),
    )
    op.create_index("ix_audit_at", "audit", ["at"])
    op.create_index("ix_audit_consumer", "audit", ["consumer"])


def downgrade() -> None:
    op.drop_index("ix_audit_consumer", table_name="audit")
    op.drop_index("ix_audit_at", table_name="audit")
    op.drop_table("audit")
    op.drop_table("quarantine")
