"""credentials under more names, and peers' echoes of credentials, are redacted in stored rows

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03

The maintained list of secret parameter names (``service.safetext.SECRET_QUERY_PARAMETERS``)
grew: ``bearer``, ``code``, ``pat``, ``refresh``, ``refresh_token``, ``session_id`` and
``ticket``; a path's ``?name=value`` is judged without a scheme too, and ``Basic <base64>`` /
``Bearer <token>`` in text are cut. Rows written under the old rule are rewritten as 0010 did
(``service.store.reredact``), delivery attempts' response bodies included.

Downgrade keeps the rewritten rows: the schema is the same.
"""

from alembic import op

from service.store.reredact import rewrite

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    rewrite(op.get_bind())


def downgrade() -> None:
    pass
