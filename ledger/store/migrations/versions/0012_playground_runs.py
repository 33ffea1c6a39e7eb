"""playground runs: the App's Runs (kind `run`, no API key), their numbers and Activations

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-20

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0012'
down_revision: Union[str, Sequence[str], None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

OLD_SOURCES = ('api', 'job', 'loom', 'harvest')
NEW_SOURCES = ('api', 'job', 'loom', 'harvest', 'playground')
RUN_STATUSES = ('queued', 'running', 'completed', 'failed', 'stopped')


def _set_sources(sources: tuple[str, ...]) -> None:
    """The CHECK of `holds.source` (VARCHAR, native_enum=False) names these sources."""
    listed = ", ".join(f"'{source}'" for source in sources)
    with op.batch_alter_table('holds') as batch_op:
        batch_op.drop_constraint(op.f('ck_holds_source'), type_='check')
        batch_op.create_check_constraint(op.f('ck_holds_source'), sa.text(f"source IN ({listed})"))


def upgrade() -> None:
    _set_sources(NEW_SOURCES)
    # A Run uses no API key.
    with op.batch_alter_table('work') as batch_op:
        batch_op.alter_column('key_id', existing_type=sa.Uuid(), nullable=True)
    # A Run whose Runner died fails, keeping its text; the other kinds run again.
    with op.batch_alter_table('work_queues') as batch_op:
        batch_op.add_column(sa.Column('fail_on_lost_lease', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
    queues = sa.table('work_queues', sa.column('kind', sa.String()), sa.column('fail_on_lost_lease', sa.Boolean()))
    op.execute(queues.update().where(queues.c.kind == 'run').values(fail_on_lost_lease=True))
    op.create_table('playground_runs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('group_id', sa.Uuid(), nullable=True),
    sa.Column('work_id', sa.Uuid(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('served_model', sa.String(length=200), nullable=False),
    sa.Column('request', sa.Text(), nullable=False),
    sa.Column('status', sa.Enum(*RUN_STATUSES, name='status', native_enum=False, create_constraint=True,
                                length=16), nullable=False),
    sa.Column('completion_id', sa.String(length=64), nullable=False),
    sa.Column('choices', sa.Text(), nullable=False),
    sa.Column('usage', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('used_tokens', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('activations_expire_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_playground_runs_user_id_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_playground_runs'))
    )
    op.create_index('uq_playground_runs_user_id_number', 'playground_runs', ['user_id', 'number'], unique=True)
    op.create_index('ix_playground_runs_group_id', 'playground_runs', ['group_id'])
    op.create_index('ix_playground_runs_work_id', 'playground_runs', ['work_id'])
    op.create_index('ix_playground_runs_deleted_at', 'playground_runs', ['deleted_at'])
    op.create_table('playground_activations',
    sa.Column('run_id', sa.Uuid(), nullable=False),
    sa.Column('data', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['playground_runs.id'],
                            name=op.f('fk_playground_activations_run_id_playground_runs')),
    sa.PrimaryKeyConstraint('run_id', name=op.f('pk_playground_activations'))
    )
    op.create_table('playground_counters',
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('last_number', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_playground_counters_user_id_users')),
    sa.PrimaryKeyConstraint('user_id', name=op.f('pk_playground_counters'))
    )


def downgrade() -> None:
    op.drop_table('playground_counters')
    op.drop_table('playground_activations')
    op.drop_index('ix_playground_runs_deleted_at', table_name='playground_runs')
    op.drop_index('ix_playground_runs_work_id', table_name='playground_runs')
    op.drop_index('ix_playground_runs_group_id', table_name='playground_runs')
    op.drop_index('uq_playground_runs_user_id_number', table_name='playground_runs')
    op.drop_table('playground_runs')
    with op.batch_alter_table('work_queues') as batch_op:
        batch_op.drop_column('fail_on_lost_lease')
    op.execute("DELETE FROM work WHERE kind = 'run'")
    with op.batch_alter_table('work') as batch_op:
        batch_op.alter_column('key_id', existing_type=sa.Uuid(), nullable=False)
    op.execute("DELETE FROM holds WHERE source = 'playground'")
    _set_sources(OLD_SOURCES)
