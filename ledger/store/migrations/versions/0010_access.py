"""access: the App's sign-in: users' email and password, Applications, Invites, password links, sessions,
sign-in tries and the mail outbox

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-15

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0010'
down_revision: Union[str, Sequence[str], None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def _state(name: str, *values: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=16)


def _id() -> sa.Column:
    return sa.Column('id', sa.Uuid(), nullable=False)


def _user_id() -> sa.Column:
    return sa.Column('user_id', sa.Uuid(), nullable=False)


def upgrade() -> None:
    with op.batch_alter_table('users') as batch_op:
        batch_op.add_column(sa.Column('email', sa.String(length=320), nullable=True))
        batch_op.add_column(sa.Column('password_hash', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('password_set_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_unique_constraint(op.f('uq_users_email'), ['email'])
    op.create_table('applications',
    _id(),
    sa.Column('email', sa.String(length=320), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('organization', sa.String(length=200), nullable=False),
    sa.Column('planned_usage', sa.Text(), nullable=False),
    sa.Column('how_you_heard', sa.Text(), nullable=False),
    sa.Column('links', sa.Text(), nullable=False),
    sa.Column('expected_tokens', sa.String(length=100), nullable=False),
    sa.Column('status', _state('application_status', 'waiting', 'approved', 'rejected'), nullable=False),
    sa.Column('note', sa.Text(), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_by', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_applications_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_applications'))
    )
    op.create_index('ix_applications_email', 'applications', ['email'])
    op.create_table('invites',
    _id(),
    sa.Column('email', sa.String(length=320), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('tokens', sa.BigInteger(), nullable=True),
    sa.Column('tag', sa.String(length=32), nullable=True),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_invites')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_invites_token_hash'))
    )
    op.create_index('ix_invites_email', 'invites', ['email'])
    op.create_table('password_links',
    _id(),
    _user_id(),
    sa.Column('purpose', _state('purpose', 'approval', 'set', 'reset'), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_password_links_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_password_links')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_password_links_token_hash'))
    )
    op.create_index('ix_password_links_user_id', 'password_links', ['user_id'])
    op.create_table('app_sessions',
    _id(),
    _user_id(),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('renewed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_app_sessions_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_app_sessions')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_app_sessions_token_hash'))
    )
    op.create_index('ix_app_sessions_user_id', 'app_sessions', ['user_id'])
    op.create_table('access_tries',
    _id(),
    sa.Column('family', sa.String(length=16), nullable=False),
    sa.Column('address', sa.String(length=100), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_access_tries'))
    )
    op.create_index('ix_access_tries_family_address_at', 'access_tries', ['family', 'address', 'at'])
    op.create_table('mail_outbox',
    _id(),
    sa.Column('to_address', sa.String(length=320), nullable=False),
    sa.Column('subject', sa.String(length=200), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('claimed_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('tries', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_mail_outbox'))
    )
    op.create_index('ix_mail_outbox_sent_at', 'mail_outbox', ['sent_at'])


def downgrade() -> None:
    op.drop_index('ix_mail_outbox_sent_at', table_name='mail_outbox')
    op.drop_table('mail_outbox')
    op.drop_index('ix_access_tries_family_address_at', table_name='access_tries')
    op.drop_table('access_tries')
    op.drop_index('ix_app_sessions_user_id', table_name='app_sessions')
    op.drop_table('app_sessions')
    op.drop_index('ix_password_links_user_id', table_name='password_links')
    op.drop_table('password_links')
    op.drop_index('ix_invites_email', table_name='invites')
    op.drop_table('invites')
    op.drop_index('ix_applications_email', table_name='applications')
    op.drop_table('applications')
    with op.batch_alter_table('users') as batch_op:
        batch_op.drop_constraint(op.f('uq_users_email'), type_='unique')
        batch_op.drop_column('password_set_at')
        batch_op.drop_column('password_hash')
        batch_op.drop_column('email')
