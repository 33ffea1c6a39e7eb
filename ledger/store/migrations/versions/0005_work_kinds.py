"""work kinds: Loom Nodes, harvests and Playground Runs beside Jobs, each with its queue

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

OLD_KINDS = ('job',)
NEW_KINDS = ('job', 'node', 'harvest', 'run')


def _set_kinds(kinds: tuple[str, ...]) -> None:
    """The CHECK of the `kind` columns (VARCHAR, native_enum=False) names these kinds."""
    listed = ", ".join(f"'{kind}'" for kind in kinds)
    for table in ('work_queues', 'work'):
        with op.batch_alter_table(table) as batch_op:
            batch_op.drop_constraint(op.f(f'ck_{table}_kind'), type_='check')
            batch_op.create_check_constraint(op.f(f'ck_{table}_kind'), sa.text(f"kind IN ({listed})"))


def upgrade() -> None:
    _set_kinds(NEW_KINDS)
    with op.batch_alter_table('work_queues') as batch_op:
        batch_op.add_column(sa.Column('fair_to_users', sa.Boolean(), nullable=False, server_default=sa.false()))
    queues = sa.table('work_queues', sa.column('kind', sa.String()), sa.column('max_running', sa.Integer()),
                      sa.column('fair_to_users', sa.Boolean()))
    # The spec's order of the work: Jobs go to a User with none running first;
    # Nodes (8 at once), harvests and Runs run apart, the oldest first.
    op.execute(queues.update().where(queues.c.kind == 'job').values(fair_to_users=True))
    op.bulk_insert(queues, [
        {"kind": "node", "max_running": 8, "fair_to_users": False},
        {"kind": "harvest", "max_running": 2, "fair_to_users": False},
        {"kind": "run", "max_running": 8, "fair_to_users": False},
    ])


def downgrade() -> None:
    op.execute("DELETE FROM work WHERE kind <> 'job'")
    op.execute("DELETE FROM work_queues WHERE kind <> 'job'")
    with op.batch_alter_table('work_queues') as batch_op:
        batch_op.drop_column('fair_to_users')
    _set_kinds(OLD_KINDS)
