"""Resources and devices: the host's resource vector as its agent reports it, what each slot of
an allocation needs, and the GPUs (and pinned cores) each activity holds.

Revision ID: 0007
Revises: 0006
"""
from alembic import op
import sqlalchemy as sa

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hosts") as t:
        t.add_column(sa.Column("resources", sa.JSON(), nullable=True))
    with op.batch_alter_table("allocations") as t:
        t.add_column(sa.Column("resources", sa.JSON(), nullable=True))
    with op.batch_alter_table("activities") as t:
        t.add_column(sa.Column("devices", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("activities") as t:
        t.drop_column("devices")
    with op.batch_alter_table("allocations") as t:
        t.drop_column("resources")
    with op.batch_alter_table("hosts") as t:
        t.drop_column("resources")
