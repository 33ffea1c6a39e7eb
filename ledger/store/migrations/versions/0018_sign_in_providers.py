"""sign in providers: linked sign-in providers

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa



# revision identifiers, used by Alembic.
revision: str = '0018'
down_revision: Union[str, Sequence[str], None] = '0017'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    # Who each provider's subject is here, and nothing of the provider's tokens (ledger/accounts/identities.py).
    op.create_table('sign_in_identities',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('provider', sa.String(length=40), nullable=False),
    sa.Column('subject', sa.String(length=255), nullable=False),
    sa.Column('email', sa.String(length=320), nullable=False),
    sa.Column('linked_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_sign_in_identities_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sign_in_identities')),
    sa.UniqueConstraint('provider', 'subject', name=op.f('uq_sign_in_identities_provider_subject')),
    sa.UniqueConstraint('user_id', 'provider', name=op.f('uq_sign_in_identities_user_id_provider'))
    )
    op.create_index('ix_sign_in_identities_user_id', 'sign_in_identities', ['user_id'])


def downgrade() -> None:
    op.drop_index('ix_sign_in_identities_user_id', table_name='sign_in_identities')
    op.drop_table('sign_in_identities')
