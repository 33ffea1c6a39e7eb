"""operations: an admin role and tags on Users, warm windows, the GPU spend's samples, the stop's history

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('users') as batch_op:
        batch_op.add_column(sa.Column('role', sa.Enum('user', 'admin', name='role', native_enum=False,
                                                      create_constraint=True, length=16),
                                      server_default='user', nullable=False))
    op.create_table('user_tags',
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('tag', sa.String(length=32), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_user_tags_user_id_users')),
    sa.PrimaryKeyConstraint('user_id', 'tag', name=op.f('pk_user_tags'))
    )
    op.create_table('warm_windows',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('model_id', sa.String(length=100), nullable=False),
    sa.Column('days', sa.String(length=20), nullable=False),
    sa.Column('start_minute', sa.Integer(), nullable=False),
    sa.Column('end_minute', sa.Integer(), nullable=False),
    sa.Column('time_zone', sa.String(length=64), nullable=False),
    sa.Column('starts_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_warm_windows'))
    )
    op.create_index('ix_warm_windows_model_id', 'warm_windows', ['model_id'])
    op.create_table('spend_samples',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('model_id', sa.String(length=100), nullable=False),
    sa.Column('replicas', sa.Integer(), nullable=False),
    sa.Column('gpus', sa.Float(), nullable=False),
    sa.Column('seconds', sa.Float(), nullable=False),
    sa.Column('usd', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_spend_samples'))
    )
    op.create_index('ix_spend_samples_at', 'spend_samples', ['at'])
    op.create_table('spend_stop_changes',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('kind', sa.Enum('lock', 'clear', 'pause', name='kind', native_enum=False, create_constraint=True,
                              length=16), nullable=False),
    sa.Column('by', sa.String(length=200), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=False),
    sa.Column('usd', sa.Float(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_spend_stop_changes'))
    )


def downgrade() -> None:
    op.drop_table('spend_stop_changes')
    op.drop_index('ix_spend_samples_at', table_name='spend_samples')
    op.drop_table('spend_samples')
    op.drop_index('ix_warm_windows_model_id', table_name='warm_windows')
    op.drop_table('warm_windows')
    op.drop_table('user_tags')
    with op.batch_alter_table('users') as batch_op:
        batch_op.drop_column('role')
