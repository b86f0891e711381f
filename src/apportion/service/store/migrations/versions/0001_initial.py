"""The first schema: plans, tokens, clients, hosts, allocations, holdings, fences, activities, events.

Revision ID: 0001
Revises:
"""
from alembic import op
import sqlalchemy as sa

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('activities',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('allocation', sa.Integer(), nullable=False),
    sa.Column('client', sa.Integer(), nullable=False),
    sa.Column('host', sa.String(length=200), nullable=False),
    sa.Column('argv', sa.JSON(), nullable=False),
    sa.Column('env', sa.JSON(), nullable=False),
    sa.Column('cwd', sa.Text(), nullable=True),
    sa.Column('slots', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('signal', sa.Integer(), nullable=True),
    sa.Column('pid', sa.Integer(), nullable=True),
    sa.Column('stop', sa.Boolean(), nullable=False),
    sa.Column('stop_reason', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.Column('ended_at', sa.Float(), nullable=True),
    sa.Column('stdout', sa.JSON(), nullable=False),
    sa.Column('stderr', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_activities_allocation'), 'activities', ['allocation'], unique=False)
    op.create_index(op.f('ix_activities_host'), 'activities', ['host'], unique=False)
    op.create_table('allocations',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('client', sa.Integer(), nullable=False),
    sa.Column('consumer', sa.String(length=400), nullable=False),
    sa.Column('groups', sa.JSON(), nullable=False),
    sa.Column('min', sa.Integer(), nullable=False),
    sa.Column('max', sa.Integer(), nullable=False),
    sa.Column('order', sa.Integer(), nullable=False),
    sa.Column('exclusive', sa.Boolean(), nullable=False),
    sa.Column('requirement', sa.Text(), nullable=True),
    sa.Column('blocked', sa.JSON(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_allocations_client'), 'allocations', ['client'], unique=False)
    op.create_index(op.f('ix_allocations_consumer'), 'allocations', ['consumer'], unique=False)
    op.create_table('clients',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('consumer', sa.String(length=400), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name')
    )
    op.create_table('events',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('client', sa.Integer(), nullable=False),
    sa.Column('body', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_events_client'), 'events', ['client'], unique=False)
    op.create_table('fences',
    sa.Column('request', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('host', sa.String(length=200), nullable=False),
    sa.Column('slots', sa.Integer(), nullable=False),
    sa.Column('group', sa.String(length=200), nullable=True),
    sa.Column('pool', sa.String(length=400), nullable=True),
    sa.Column('pooled', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('request', 'host')
    )
    op.create_table('holdings',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('request', sa.Integer(), nullable=False),
    sa.Column('group', sa.String(length=200), nullable=False),
    sa.Column('host', sa.String(length=200), nullable=False),
    sa.Column('slots', sa.Integer(), nullable=False),
    sa.Column('source', sa.String(length=400), nullable=False),
    sa.Column('deadline', sa.Float(), nullable=True),
    sa.Column('beneficiary', sa.String(length=400), nullable=True),
    sa.Column('reason', sa.String(length=400), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_holdings_host'), 'holdings', ['host'], unique=False)
    op.create_index(op.f('ix_holdings_request'), 'holdings', ['request'], unique=False)
    op.create_table('hosts',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('slots', sa.Integer(), nullable=False),
    sa.Column('memory', sa.Float(), nullable=False),
    sa.Column('os', sa.String(length=100), nullable=False),
    sa.Column('attributes', sa.JSON(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('closed', sa.Boolean(), nullable=False),
    sa.Column('last_seen', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('name')
    )
    op.create_table('meta',
    sa.Column('key', sa.String(length=100), nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('key')
    )
    op.create_table('plans',
    sa.Column('version', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('applied_by', sa.String(length=200), nullable=False),
    sa.Column('applied_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('version')
    )
    op.create_table('tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('consumer', sa.String(length=400), nullable=True),
    sa.Column('host', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('digest')
    )



def downgrade() -> None:

    op.drop_table('tokens')
    op.drop_table('plans')
    op.drop_table('meta')
    op.drop_table('hosts')
    op.drop_index(op.f('ix_holdings_request'), table_name='holdings')
    op.drop_index(op.f('ix_holdings_host'), table_name='holdings')
    op.drop_table('holdings')
    op.drop_table('fences')
    op.drop_index(op.f('ix_events_client'), table_name='events')
    op.drop_table('events')
    op.drop_table('clients')
    op.drop_index(op.f('ix_allocations_consumer'), table_name='allocations')
    op.drop_index(op.f('ix_allocations_client'), table_name='allocations')
    op.drop_table('allocations')
    op.drop_index(op.f('ix_activities_host'), table_name='activities')
    op.drop_index(op.f('ix_activities_allocation'), table_name='activities')
    op.drop_table('activities')

