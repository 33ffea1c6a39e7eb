"""feedback: feedback notes and screenshots

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0017'
down_revision: Union[str, Sequence[str], None] = '0016'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # The App's Send feedback (ledger/accounts/feedback.py); the screenshots' bytes are in file storage.
    op.create_table('feedback_notes',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=True),
    sa.Column('kind', sa.Enum('bug', 'feature_request', 'general', name='kind', native_enum=False,
                              create_constraint=True, length=16), nullable=False),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('page', sa.String(length=2000), nullable=False),
    sa.Column('browser', sa.String(length=500), nullable=False),
    sa.Column('errors', sa.JSON(), nullable=False),
    sa.Column('screenshots', sa.JSON(), nullable=False),
    sa.Column('linear_url', sa.String(length=500), nullable=True),
    sa.Column('linear_error', sa.String(length=500), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_feedback_notes_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_feedback_notes'))
    )
    op.create_index(op.f('ix_feedback_notes_user_id'), 'feedback_notes', ['user_id'])


def downgrade() -> None:
    op.drop_index(op.f('ix_feedback_notes_user_id'), table_name='feedback_notes')
    op.drop_table('feedback_notes')
