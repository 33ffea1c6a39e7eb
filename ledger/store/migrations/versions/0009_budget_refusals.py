"""budget refusals: each request that the tokens could not hold, for the Analytics' Budget tab

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('budget_refusals',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('key_id', sa.Uuid(), nullable=True),
    sa.Column('model', sa.String(length=100), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('tokens', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_budget_refusals'))
    )
    op.create_index('ix_budget_refusals_at', 'budget_refusals', ['at'])


def downgrade() -> None:
    op.drop_index('ix_budget_refusals_at', table_name='budget_refusals')
    op.drop_table('budget_refusals')
