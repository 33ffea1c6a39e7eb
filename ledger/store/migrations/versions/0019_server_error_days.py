"""server error days: the API's 5xx answers and timeouts of each UTC day, for Analytics' Platform tab

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0019'
down_revision: Union[str, Sequence[str], None] = '0018'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # One row per UTC day and kind (server_error, timeout), counted up in place (ledger/tokens/server_errors.py).
    op.create_table('server_error_days',
    sa.Column('day', sa.Date(), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('day', 'kind', name=op.f('pk_server_error_days'))
    )


def downgrade() -> None:
    op.drop_table('server_error_days')
