"""user details: a User s details and notes

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0015'
down_revision: Union[str, Sequence[str], None] = '0014'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # The admins' notes on a User (ledger/accounts/user_notes.py).
    op.create_table('user_notes',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('author_id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_user_notes_user_id_users')),
    sa.ForeignKeyConstraint(['author_id'], ['users.id'], name=op.f('fk_user_notes_author_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_user_notes'))
    )
    op.create_index(op.f('ix_user_notes_user_id'), 'user_notes', ['user_id'])


def downgrade() -> None:
    op.drop_index(op.f('ix_user_notes_user_id'), table_name='user_notes')
    op.drop_table('user_notes')
