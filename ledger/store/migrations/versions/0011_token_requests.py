"""token requests: the App's Request more tokens, and each Hold's prompt tokens (input and output on Usage)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-15

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0011'
down_revision: Union[str, Sequence[str], None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

_WAITING = sa.text("status = 'waiting'")


def upgrade() -> None:
    # Holds taken before this count all their tokens as output: their prompts were not recorded.
    with op.batch_alter_table('holds') as batch_op:
        batch_op.add_column(sa.Column('prompt_tokens', sa.BigInteger(), nullable=False, server_default='0'))
    op.create_table('token_requests',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('tokens', sa.BigInteger(), nullable=False),
    sa.Column('models', sa.JSON(), nullable=False),
    sa.Column('project', sa.String(length=200), nullable=False),
    sa.Column('planned_usage', sa.Text(), nullable=False),
    sa.Column('how_you_got_the_number', sa.Text(), nullable=False),
    sa.Column('results', sa.Text(), nullable=False),
    sa.Column('links', sa.Text(), nullable=False),
    sa.Column('when_needed', sa.Text(), nullable=False),
    sa.Column('status', sa.Enum('waiting', 'approved', 'rejected', name='status', native_enum=False,
                                create_constraint=True, length=16), nullable=False),
    sa.Column('granted', sa.BigInteger(), nullable=True),
    sa.Column('note', sa.String(length=200), nullable=False),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_by', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_token_requests_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_token_requests'))
    )
    op.create_index(op.f('ix_token_requests_user_id'), 'token_requests', ['user_id'])
    op.create_index('uq_token_requests_user_id_waiting', 'token_requests', ['user_id'], unique=True,
                    postgresql_where=_WAITING, sqlite_where=_WAITING)


def downgrade() -> None:
    op.drop_index('uq_token_requests_user_id_waiting', table_name='token_requests')
    op.drop_index(op.f('ix_token_requests_user_id'), table_name='token_requests')
    op.drop_table('token_requests')
    with op.batch_alter_table('holds') as batch_op:
        batch_op.drop_column('prompt_tokens')
