"""spend warnings: the warn amounts mailed

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05

"""
from typing import Sequence, Union

from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401


# revision identifiers, used by Alembic.
revision: str = '0016'
down_revision: Union[str, Sequence[str], None] = '0015'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # The warn amounts that the spend is past, each mailed once when it crossed (ledger/tokens/spend_warnings.py).
    op.create_table('spend_warnings',
    sa.Column('amount_cents', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('crossed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('spend_usd', sa.Float(), nullable=False),
    sa.PrimaryKeyConstraint('amount_cents', name=op.f('pk_spend_warnings'))
    )


def downgrade() -> None:
    op.drop_table('spend_warnings')
