"""users deleted: the Users tab's Delete, and the Details that an admin types on a User's page

A deleted User keeps its row (the ledger's Holds and Grants name it); `deleted_at` says it is gone.
`organization` (replacing the Application's answer on the Admin page) and `discord_handle` are typed
by an admin in Details.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0014'
down_revision: Union[str, Sequence[str], None] = '0013'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('users') as batch_op:
        batch_op.add_column(sa.Column('organization', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('discord_handle', sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('users') as batch_op:
        batch_op.drop_column('deleted_at')
        batch_op.drop_column('discord_handle')
        batch_op.drop_column('organization')
