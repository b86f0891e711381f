"""Client names are per consumer: the same name under two consumers is two clients (as a
Kubernetes name is per namespace), so registering a name tells no tenant of another's client.

Revision ID: 0006
Revises: 0005
"""
from alembic import op
import sqlalchemy as sa

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _clients(*unique: str, name: str) -> sa.Table:
    return sa.Table(
        "clients", sa.MetaData(),
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("consumer", sa.String(length=400), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(*unique, name=name),
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":  # SQLite cannot drop a constraint in place: the table made again
        with op.batch_alter_table("clients", recreate="always",
                                  copy_from=_clients("consumer", "name", name="uq_clients_consumer_name")):
            pass
        return
    op.drop_constraint("clients_name_key", "clients", type_="unique")  # PostgreSQL's name for it
    op.create_unique_constraint("uq_clients_consumer_name", "clients", ["consumer", "name"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("clients", recreate="always", copy_from=_clients("name", name="clients_name_key")):
            pass
        return
    op.drop_constraint("uq_clients_consumer_name", "clients", type_="unique")
    op.create_unique_constraint("clients_name_key", "clients", ["name"])
