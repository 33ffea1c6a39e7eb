"""work queues: background work (Jobs) that the Runner claims with a lease

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0004'
down_revision: Union[str, Sequence[str], None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    queues = op.create_table('work_queues',
    sa.Column('kind', sa.Enum('job', name='kind', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('max_running', sa.Integer(), nullable=False),
    sa.Column('polled_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('kind', name=op.f('pk_work_queues'))
    )
    op.create_table('work',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('kind', sa.Enum('job', name='kind', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('key_id', sa.Uuid(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('model_id', sa.String(length=100), nullable=False),
    sa.Column('status', sa.Enum('queued', 'running', 'succeeded', 'failed', 'cancelled', name='status', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('request', sa.Text(), nullable=False),
    sa.Column('request_id', sa.String(length=64), nullable=False),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_owner', sa.String(length=64), nullable=False),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('hold_id', sa.Uuid(), nullable=True),
    sa.Column('result_status', sa.Integer(), nullable=True),
    sa.Column('result_body', sa.Text(), nullable=True),
    sa.Column('result_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['key_id'], ['api_keys.id'], name=op.f('fk_work_key_id_api_keys')),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_work_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_work'))
    )
    with op.batch_alter_table('work', schema=None) as batch_op:
        batch_op.create_index('ix_work_key_id_kind_status', ['key_id', 'kind', 'status'], unique=False)
        batch_op.create_index('ix_work_kind_status_created_at', ['kind', 'status', 'created_at'], unique=False)
        batch_op.create_index('ix_work_status_lease_until', ['status', 'lease_until'], unique=False)
        batch_op.create_index('ix_work_user_id_kind_status', ['user_id', 'kind', 'status'], unique=False)
    # The spec's "Jobs that run at once: 4, for all Users".
    op.bulk_insert(queues, [{"kind": "job", "max_running": 4}])


def downgrade() -> None:
    with op.batch_alter_table('work', schema=None) as batch_op:
        batch_op.drop_index('ix_work_user_id_kind_status')
        batch_op.drop_index('ix_work_status_lease_until')
        batch_op.drop_index('ix_work_kind_status_created_at')
        batch_op.drop_index('ix_work_key_id_kind_status')

    op.drop_table('work')
    op.drop_table('work_queues')
