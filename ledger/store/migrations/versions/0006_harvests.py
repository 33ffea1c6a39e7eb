"""harvests: what a harvest adds to its work row; a User's harvest quota

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('harvests',
    sa.Column('work_id', sa.Uuid(), nullable=False),
    sa.Column('model_class', sa.String(length=16), nullable=False),
    sa.Column('n_prompts', sa.Integer(), nullable=False),
    sa.Column('reserved_tokens', sa.BigInteger(), nullable=False),
    sa.Column('layers', sa.Text(), nullable=False),
    sa.Column('run_name', sa.String(length=100), nullable=False),
    sa.Column('gpu_started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('prompts_done', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['work_id'], ['work.id'], name=op.f('fk_harvests_work_id_work')),
    sa.PrimaryKeyConstraint('work_id', name=op.f('pk_harvests'))
    )
    with op.batch_alter_table('users') as batch_op:
        batch_op.add_column(sa.Column('harvest_quota', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('users') as batch_op:
        batch_op.drop_column('harvest_quota')
    op.drop_table('harvests')
