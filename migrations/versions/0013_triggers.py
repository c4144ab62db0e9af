"""triggers: a program the daemon runs on every stored revision whose URI matches, and the
run outbox

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03

``triggers`` are command targets (docs/triggers.md). ``trigger_runs`` is their outbox, as
``deliveries`` is the webhooks': one row per (trigger, revision), inserted in the revision's
transaction (``service/triggers/outbox.py``), so a crash loses no acknowledged change.
``trigger_attempts`` keeps each attempt: start, end, exit status or signal, the bounded and
redacted tails of stdout and stderr.
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "triggers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text),
        sa.Column("program", sa.Text, nullable=False),
        sa.Column("args", sa.Text, nullable=False, server_default="[]"),
        sa.Column("uri_patterns", sa.Text, nullable=False, server_default="[]"),
        sa.Column("mode", sa.String(16), nullable=False, server_default="all"),
        sa.Column("concurrency", sa.Integer, nullable=False, server_default="1"),
        sa.Column("timeout_s", sa.Float, nullable=False),
        sa.Column("env", sa.Text, nullable=False, server_default="[]"),
        sa.Column("cwd", sa.Text),
        sa.Column("enabled", sa.Integer, nullable=False, server_default="1"),
        sa.Column("created_by", sa.String(16), nullable=False, server_default="person"),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "trigger_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "trigger_id",
            sa.Integer,
            sa.ForeignKey("triggers.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("event_id", sa.Integer),
        sa.Column("revision_id", sa.Integer),
        sa.Column("subscription_id", sa.Integer),
        sa.Column("uri", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False, server_default="pending"),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("budget_from", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.Float, nullable=False),
        sa.Column("last_exit", sa.Integer),
        sa.Column("last_signal", sa.String(16)),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("finished_at", sa.Float),
        sa.Column("lease_owner", sa.String(128)),
        sa.Column("lease_until", sa.Float),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_trigger_runs_due", "trigger_runs", ["state", "next_attempt_at"])
    op.create_index("ix_trigger_runs_order", "trigger_runs", ["trigger_id", "uri", "id"])
    op.create_table(
        "trigger_attempts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "run_id",
            sa.Integer,
            sa.ForeignKey("trigger_runs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float),
        sa.Column("duration_ms", sa.Float),
        sa.Column("exit_code", sa.Integer),
        sa.Column("signal", sa.String(16)),
        sa.Column("timed_out", sa.Integer, nullable=False, server_default="0"),
        sa.Column("error", sa.Text),
        sa.Column("stdout_tail", sa.Text),
        sa.Column("stderr_tail", sa.Text),
        sa.Column("stdout_bytes", sa.Integer, nullable=False, server_default="0"),
        sa.Column("stderr_bytes", sa.Integer, nullable=False, server_default="0"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_trigger_attempts_run", "trigger_attempts", ["run_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_trigger_attempts_run", table_name="trigger_attempts")
    op.drop_table("trigger_attempts")
    op.drop_index("ix_trigger_runs_order", table_name="trigger_runs")
    op.drop_index("ix_trigger_runs_due", table_name="trigger_runs")
    op.drop_table("trigger_runs")
    op.drop_table("triggers")
