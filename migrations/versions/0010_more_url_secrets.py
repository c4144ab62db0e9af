"""credentials under more parameter names are stored apart from the shown URL

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

The redaction rule (``service.safetext.is_secret_parameter``) grew from five query parameter
names to a maintained list (``password``, ``secret``, ``client_secret``, ``apikey``,
``auth`` …) plus any name containing ``token``, ``secret``, ``password`` or ``key``, in the
query, in the path's ``;name=value`` parameters and in the fragment. Rows written under the
old rule may show such a value in clear: they are rewritten as 0008 did, from the full URL
(``url_secret`` when there is one), keeping a credential key already set; the copies of URLs
in events, errors and delivery attempts are redacted in place.

Downgrade keeps the rewritten rows: 0009's schema is the same, and the full URLs stay in
``url_secret`` where the wire reads them.
"""

from alembic import op

from service.store.reredact import rewrite

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    rewrite(op.get_bind())


def downgrade() -> None:
    pass
