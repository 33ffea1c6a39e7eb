"""looms: trees of Nodes, each Node of a Branch run by a `node` work row

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

NODE_STATUSES = ('queued', 'running', 'completed', 'failed', 'cancelled')


def upgrade() -> None:
    op.create_table('looms',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('title', sa.String(length=120), nullable=False),
    sa.Column('pinned_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('model', sa.String(length=200), nullable=True),
    sa.Column('last_generation_config', sa.Text(), nullable=True),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_looms_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_looms'))
    )
    op.create_index('ix_looms_user_id_deleted_at', 'looms', ['user_id', 'deleted_at'])
    op.create_table('loom_nodes',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('loom_id', sa.Uuid(), nullable=False),
    sa.Column('parent_id', sa.Uuid(), nullable=True),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('status', sa.Enum(*NODE_STATUSES, name='status', native_enum=False, create_constraint=True,
                                length=16), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('logprobs', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('request', sa.Text(), nullable=True),
    sa.Column('work_id', sa.Uuid(), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('used_tokens', sa.Integer(), nullable=False),
    sa.Column('text_modified', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('context_modified', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('slice_offset', sa.Integer(), nullable=True),
    sa.Column('slice_end', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['loom_id'], ['looms.id'], name=op.f('fk_loom_nodes_loom_id_looms')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_loom_nodes'))
    )
    op.create_index('ix_loom_nodes_loom_id', 'loom_nodes', ['loom_id'])
    op.create_index('ix_loom_nodes_work_id', 'loom_nodes', ['work_id'])


def downgrade() -> None:
    op.drop_index('ix_loom_nodes_work_id', table_name='loom_nodes')
    op.drop_index('ix_loom_nodes_loom_id', table_name='loom_nodes')
    op.drop_table('loom_nodes')
    op.drop_index('ix_looms_user_id_deleted_at', table_name='looms')
    op.drop_table('looms')
