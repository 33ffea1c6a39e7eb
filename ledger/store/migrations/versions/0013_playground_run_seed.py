"""playground run seed: the seed each Run samples with, kept so that Restore brings it back

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0013'
down_revision: Union[str, Sequence[str], None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('playground_runs') as batch_op:
        batch_op.add_column(sa.Column('seed', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('playground_runs') as batch_op:
        batch_op.drop_column('seed')
